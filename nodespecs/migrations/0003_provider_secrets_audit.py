"""Provider env and headers encrypted at rest; the audit trail.

The JSON columns become text (PostgreSQL casts jsonb to its text form), each row's JSON is
encrypted in place, then the field becomes the encrypted one (same text column). Reversible:
going back decrypts, and needs the key the rows were encrypted with.
"""

import json

from cryptography.fernet import InvalidToken
from django.db import migrations, models

import nodespecs.secrets

SECRET_FIELDS = ("env", "headers")


def encrypt_rows(apps, schema_editor):
    Provider = apps.get_model("nodespecs", "Provider")
    for provider in Provider.objects.only("pk", *SECRET_FIELDS):
        values = {
            field: nodespecs.secrets.encrypt_json(json.loads(getattr(provider, field) or "{}"))
            for field in SECRET_FIELDS
        }
        Provider.objects.filter(pk=provider.pk).update(**values)


def decrypt_rows(apps, schema_editor):
    Provider = apps.get_model("nodespecs", "Provider")
    for provider in Provider.objects.only("pk", "name", *SECRET_FIELDS):
        try:
            values = {
                field: json.dumps(nodespecs.secrets.decrypt_json(getattr(provider, field)))
                for field in SECRET_FIELDS
            }
        except InvalidToken:
            raise RuntimeError(
                f"Provider {provider.name!r}: its secrets cannot be decrypted with the keys in "
                "SWITCHYARD_SECRETS_KEY, so they cannot be stored in plain text again. Set the "
                "key they were encrypted with and migrate back again."
            ) from None
        Provider.objects.filter(pk=provider.pk).update(**values)


class Migration(migrations.Migration):

    dependencies = [
        ("nodespecs", "0002_providers"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditEvent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("actor", models.CharField(max_length=150)),
                ("action", models.CharField(choices=[("created", "created"), ("changed", "changed"), ("deleted", "deleted"), ("revoked", "revoked"), ("restored", "restored a revision"), ("refreshed", "refreshed its tools"), ("re-encrypted", "re-encrypted its secrets")], max_length=16)),
                ("object_type", models.CharField(max_length=100)),
                ("object_id", models.CharField(max_length=64)),
                ("object_label", models.CharField(max_length=200)),
                ("fields", models.JSONField(blank=True, default=list, help_text="Names of the changed fields.")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "verbose_name": "audit event",
                "default_permissions": ("view",),
                "ordering": ["-created_at", "-id"],
                "indexes": [models.Index(fields=["-created_at", "-id"], name="audit_latest"), models.Index(fields=["object_type", "object_id", "-created_at"], name="audit_object")],
            },
        ),
        migrations.AlterField(
            model_name="provider",
            name="env",
            field=models.TextField(blank=True, default="{}"),
        ),
        migrations.AlterField(
            model_name="provider",
            name="headers",
            field=models.TextField(blank=True, default="{}"),
        ),
        migrations.RunPython(encrypt_rows, decrypt_rows),
        migrations.AlterField(
            model_name="provider",
            name="env",
            field=nodespecs.secrets.EncryptedJSONField(blank=True, default=dict, help_text="stdio: environment variables (secret)."),
        ),
        migrations.AlterField(
            model_name="provider",
            name="headers",
            field=nodespecs.secrets.EncryptedJSONField(blank=True, default=dict, help_text="HTTP: request headers (secret), e.g. Authorization."),
        ),
    ]
