"""Publishing became a scope of its own (workflows:publish), and operators' rights over every
group a scope too (workflows:admin). A key that held every scope before (what create_api_key
gives by default) keeps holding every scope; any other key keeps exactly what it had, so a
builder's workflows:write key can no longer publish."""

from django.db import migrations

SCOPES_BEFORE = {
    "tools:read",
    "tools:execute",
    "resources:read",
    "runs:read",
    "workflows:write",
    "health:check",
    "metrics:read",
}
NEW_SCOPES = ["workflows:publish", "workflows:admin"]


def grant_new_scopes(apps, schema_editor):
    ApiKey = apps.get_model("mcp_endpoint", "ApiKey")
    for key in ApiKey.objects.all():
        if SCOPES_BEFORE <= set(key.scopes):
            key.scopes = [*key.scopes, *(s for s in NEW_SCOPES if s not in key.scopes)]
            key.save(update_fields=["scopes"])


def withdraw_new_scopes(apps, schema_editor):
    ApiKey = apps.get_model("mcp_endpoint", "ApiKey")
    for key in ApiKey.objects.all():
        kept = [scope for scope in key.scopes if scope not in NEW_SCOPES]
        if kept != key.scopes:
            key.scopes = kept
            key.save(update_fields=["scopes"])


class Migration(migrations.Migration):
    dependencies = [("mcp_endpoint", "0001_api_keys")]

    operations = [migrations.RunPython(grant_new_scopes, withdraw_new_scopes)]
