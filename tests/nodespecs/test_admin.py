"""The spec admin as a new author meets it: list, edit with clear errors, preview, history, YAML."""

from __future__ import annotations

import html
import json

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.urls import reverse

from nodespecs.admin import TAGS_LISTED
from nodespecs.admin.forms import NodeSpecForm
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import DOCUMENT_FIELDS, NodeSpec, NodeSpecRevision

CHANGELIST = reverse("admin:nodespecs_nodespec_changelist")
ADD = reverse("admin:nodespecs_nodespec_add")
IMPORT = reverse("admin:nodespecs_nodespec_import")

# WhiteNoise warns at start-up when STATIC_ROOT (filled by collectstatic) does not exist yet,
# which it never does in a test run; that warning says nothing about the admin under test.


def change_url(spec: NodeSpec) -> str:
    return reverse("admin:nodespecs_nodespec_change", args=[spec.pk])


def revisions_url(spec: NodeSpec) -> str:
    return reverse("admin:nodespecs_nodespec_revisions", args=[spec.pk])


def restore_url(spec: NodeSpec, number: int) -> str:
    return reverse("admin:nodespecs_nodespec_restore", args=[spec.pk, number])


def page_text(response) -> str:
    """The response body with HTML entities decoded, so messages can be matched as written."""
    return html.unescape(response.content.decode())


def json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def form_data(document: dict, *, shown: dict | None = None) -> dict[str, str]:
    """What a browser posts from the add/change form: JSON fields as JSON text, and (as the
    admin renders for fields with a callable default) the hidden `initial-` copy of the
    value the page showed, which `changed_data` compares against. `shown` is the spec's
    document before the edit; None for the add form, which shows the defaults."""
    data = {}
    for name in DOCUMENT_FIELDS:
        field = NodeSpec._meta.get_field(name)
        value = document.get(name, field.get_default())
        if isinstance(value, str):
            data[name] = value
            continue
        data[name] = json_text(value)
        before = field.get_default() if shown is None else shown[name]
        data[f"initial-{name}"] = json_text(before)
    return data


def new_document(**fields) -> dict:
    return {
        "node_type": "ACTION",
        "subtype": "PING_HOST",
        "version": "1.0.0",
        "display_name": "Ping host",
        "description": "Send an ICMP ping to a host and report whether it answered.",
        "configurations": {
            "host": {"type": "string", "description": "Host name or address.", "required": True},
            "timeout": {"type": "integer", "description": "Seconds to wait.", "default": 5},
        },
        "tags": ["network", "ping"],
        **fields,
    }


@pytest.fixture
def spec(author) -> NodeSpec:
    """A custom spec with one revision, written by the author."""
    spec = NodeSpec(**new_document())
    spec_save(spec=spec, author=author, comment="Created")
    return spec


@pytest.fixture
def author_client(client, author):
    client.force_login(author)
    return client


@pytest.fixture
def viewer(django_user_model):
    """A staff user who may only look at specs."""
    user = django_user_model.objects.create_user(
        "victor", password="correct-horse-battery", is_staff=True
    )
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="nodespecs", codename="view_nodespec")
    )
    return user


def changelist_subtypes(client, query: str = "") -> set[str]:
    response = client.get(CHANGELIST + query)
    assert response.status_code == 200
    return {spec.subtype for spec in response.context["cl"].result_list}


# The changelist


def test_the_changelist_lists_the_catalog_and_links_to_the_yaml_import(
    author_client, loaded_catalog
):
    response = author_client.get(CHANGELIST)

    assert response.status_code == 200
    assert response.context["cl"].result_count == NodeSpec.objects.count()
    assert "HTTP_REQUEST" in page_text(response)
    assert f'href="{IMPORT}"' in page_text(response)
    assert "Import YAML" in page_text(response)


def test_the_changelist_filters_by_node_type(author_client, loaded_catalog):
    subtypes = changelist_subtypes(author_client, "?node_type=TRIGGER")

    expected = set(NodeSpec.objects.filter(node_type="TRIGGER").values_list("subtype", flat=True))
    assert subtypes == expected
    assert "HTTP_REQUEST" not in subtypes


def test_the_changelist_filters_by_source(author_client, loaded_catalog, spec):
    assert changelist_subtypes(author_client, "?source=custom") == {"PING_HOST"}
    assert "PING_HOST" not in changelist_subtypes(author_client, "?source=builtin")


def test_the_changelist_filters_by_tag(author_client, loaded_catalog):
    subtypes = changelist_subtypes(author_client, "?tag=slack")

    assert "SLACK" in subtypes
    assert "HTTP_REQUEST" not in subtypes
    for spec in NodeSpec.objects.filter(subtype__in=subtypes):
        assert "slack" in spec.tags


def test_the_tag_filter_offers_the_most_used_tags_and_the_one_chosen(author_client, loaded_catalog):
    offered = page_text(author_client.get(CHANGELIST))

    assert "?tag=chat" in offered  # the catalog's most used tag
    assert offered.count("?tag=") <= TAGS_LISTED + 1  # not all 252: that was 6,400 px
    assert "?tag=reshape" not in offered  # a tag of one spec
    assert "?tag=reshape" in page_text(author_client.get(CHANGELIST + "?tag=reshape"))


def test_the_changelist_search_finds_a_spec_by_subtype(author_client, loaded_catalog):
    assert "HTTP_REQUEST" in changelist_subtypes(author_client, "?q=HTTP_REQUEST")
    assert "SLACK" not in changelist_subtypes(author_client, "?q=HTTP_REQUEST")


def test_the_changelist_search_finds_a_spec_by_words_of_its_description(
    author_client, loaded_catalog, spec
):
    subtypes = changelist_subtypes(author_client, "?q=ICMP")

    assert subtypes == {"PING_HOST"}


# Creating and editing


def test_an_author_creates_a_spec_through_the_add_form(author_client, author, db):
    response = author_client.post(ADD, form_data(new_document()))

    assert response.status_code == 302, page_text(response)
    spec = NodeSpec.objects.get(node_type="ACTION", subtype="PING_HOST")
    assert spec.source == NodeSpec.Source.CUSTOM
    assert spec.configurations["timeout"]["default"] == 5
    revision = spec.revisions.get()
    assert revision.number == 1
    assert revision.author == author
    assert revision.author_name == "alice"
    assert revision.document == spec.document()


def test_the_add_form_cannot_make_a_spec_look_built_in(author_client, db):
    data = {**form_data(new_document()), "source": "builtin"}

    author_client.post(ADD, data)

    assert NodeSpec.objects.get(subtype="PING_HOST").source == NodeSpec.Source.CUSTOM


def test_the_add_form_normalises_tags(author_client, db):
    author_client.post(ADD, form_data(new_document(tags=["Network", " PING ", "network"])))

    assert NodeSpec.objects.get(subtype="PING_HOST").tags == ["network", "ping"]


def test_the_add_form_refuses_a_duplicate_type_and_subtype(author_client, spec):
    response = author_client.post(ADD, form_data(new_document(description="Another ping.")))

    assert response.status_code == 200
    assert "already exists" in page_text(response)
    assert NodeSpec.objects.filter(subtype="PING_HOST").count() == 1


def test_an_author_edits_a_spec_and_a_revision_records_the_change(author_client, author, spec):
    document = spec.document() | {"description": "Ping a host and measure the round trip."}

    response = author_client.post(change_url(spec), form_data(document, shown=spec.document()))

    assert response.status_code == 302, page_text(response)
    spec.refresh_from_db()
    assert spec.description == "Ping a host and measure the round trip."
    latest = spec.revisions.order_by("-number").first()
    assert latest.number == 2
    assert latest.author == author
    assert latest.comment == "Changed description"


def test_the_change_form_carries_the_shown_json_for_change_detection(author_client, spec):
    # form_data() above posts these hidden copies; this checks the real page renders them.
    response = author_client.get(change_url(spec))

    form = response.context["adminform"].form
    assert 'name="initial-configurations"' in page_text(response)
    # The editor shows the parameters as rows, which read back as the spec's configurations.
    shown = form["configurations"].value()
    assert [row["name"] for row in json.loads(shown)] == ["host", "timeout"]
    assert form.fields["configurations"].to_python(shown) == spec.configurations


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (
            {"type": "integer", "description": "t", "default": "ten"},
            "timeout: default 'ten' is not of type integer",
        ),
        (
            {"type": "integer", "description": "t", "min": 10, "max": 1},
            "timeout: min 10 is greater than max 1",
        ),
        (
            {"type": "integer", "description": "t", "defualt": 3},
            "timeout.defualt: unknown field: remove it or check its spelling",
        ),
    ],
    ids=["default-of-wrong-type", "min-above-max", "misspelt-key"],
)
def test_an_invalid_parameter_is_shown_by_name_and_nothing_is_saved(
    author_client, spec, param, message
):
    before = spec.document()
    document = before | {"configurations": {"timeout": param}, "description": "Changed."}

    response = author_client.post(change_url(spec), form_data(document, shown=spec.document()))

    assert response.status_code == 200
    assert "Please correct the error below." in page_text(response)
    assert message in page_text(response)
    assert message in response.context["adminform"].form.errors["configurations"][0]
    spec.refresh_from_db()
    assert spec.document() == before
    assert spec.revisions.count() == 1


def test_json_that_does_not_parse_is_refused_with_a_message(author_client, spec):
    data = form_data(spec.document(), shown=spec.document()) | {
        "configurations": '{"timeout": {"type": "integer",'
    }

    response = author_client.post(change_url(spec), data)

    assert response.status_code == 200
    assert "Enter a valid JSON." in page_text(response)
    assert spec.revisions.count() == 1


def test_the_change_page_shows_what_an_agent_receives(author_client, spec):
    response = author_client.get(change_url(spec))

    assert response.status_code == 200
    text = page_text(response)
    preview = text.split('<pre class="agent-preview">', 1)[1].split("</pre>", 1)[0]
    shown = json.loads(preview)
    assert shown["subtype"] == "PING_HOST"
    assert shown["default_configurations"] == {"host": "", "timeout": 5}
    assert shown["parameters"][1]["name"] == "timeout"
    # The preview is read-only: there is no form field for it.
    assert 'name="agent_preview"' not in text


def test_the_add_page_explains_that_the_preview_follows_the_first_save(author_client, db):
    response = author_client.get(ADD)

    assert response.status_code == 200
    assert "Save the spec to see the preview." in page_text(response)


def test_the_change_page_links_to_the_revisions(author_client, spec):
    response = author_client.get(change_url(spec))

    assert f'href="{revisions_url(spec)}"' in page_text(response)
    assert "1 revision: see and restore" in page_text(response)


# The structured editor: what the browser posts from the forms generated from the JSON Schemas


def editor_data(spec: NodeSpec, **fields) -> dict[str, str]:
    """What the change form posts once the editor has run: the spec's fields as the editor
    holds them (parameters and examples as rows), with `fields` replaced."""
    form = NodeSpecForm(instance=spec)
    data = {}
    for name in DOCUMENT_FIELDS:
        value = form[name].value()
        data[name] = value
        if name in fields:
            data[name] = fields[name] if isinstance(fields[name], str) else json_text(fields[name])
        if not isinstance(getattr(spec, name), str):
            data[f"initial-{name}"] = value
    return data


def test_every_catalog_spec_reads_back_unchanged_from_the_editor(loaded_catalog):
    for spec in NodeSpec.objects.all():
        form = NodeSpecForm(instance=spec)
        for name in ("configurations", "input_params", "output_params", "examples", "tags"):
            shown = form[name].value()
            assert form.fields[name].to_python(shown) == getattr(spec, name), (spec, name)


def test_parameter_rows_are_saved_as_the_spec_format_holds_them(author_client, spec):
    rows = [
        # Empty boxes are how the editor shows keys that are not set.
        {
            "name": "host",
            "type": "string",
            "description": "Host.",
            "default": "",
            "min": None,
            "max": None,
            "options": "",
            "validation_pattern": "",
            "required": True,
            "sensitive": False,
        },
        {
            "name": "timeout",
            "type": "integer",
            "description": "Seconds.",
            "default": "5",
            "min": 1,
            "max": 60,
            "options": "",
            "validation_pattern": "",
            "required": False,
            "sensitive": False,
        },
        {
            "name": "mode",
            "type": "string",
            "description": "Mode.",
            "default": "fast",
            "options": "fast\nslow\n",
            "required": False,
            "sensitive": False,
        },
        {
            "name": "labels",
            "type": "object",
            "description": "Labels.",
            "default": '{"a": 1}',
            "required": False,
            "sensitive": False,
        },
    ]

    response = author_client.post(change_url(spec), editor_data(spec, configurations=rows))

    assert response.status_code == 302, page_text(response)
    spec.refresh_from_db()
    assert spec.configurations == {
        "host": {"type": "string", "description": "Host.", "required": True, "sensitive": False},
        "timeout": {
            "type": "integer",
            "description": "Seconds.",
            "default": 5,
            "min": 1,
            "max": 60,
            "required": False,
            "sensitive": False,
        },
        "mode": {
            "type": "string",
            "description": "Mode.",
            "default": "fast",
            "options": ["fast", "slow"],
            "required": False,
            "sensitive": False,
        },
        "labels": {
            "type": "object",
            "description": "Labels.",
            "default": {"a": 1},
            "required": False,
            "sensitive": False,
        },
    }
    assert spec.revisions.order_by("-number").first().comment == "Changed configurations"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"name": "timeout", "type": "integer", "description": "t", "default": "ten"},
            "timeout: default 'ten' is not a JSON integer; write it like 5.",
        ),
        (
            {"name": "timeout", "type": "integer", "description": "t", "default": '"ten"'},
            "timeout: default 'ten' is not of type integer",
        ),
        (
            {"name": "timeout", "type": "integer", "description": "t", "min": 10, "max": 1},
            "timeout: min 10 is greater than max 1",
        ),
        ({"name": "timeout", "type": "integer", "description": ""}, "timeout.description"),
        ({"name": " ", "type": "integer", "description": "t"}, "Parameter 1 has no name"),
    ],
    ids=["default-not-json", "default-of-wrong-type", "min-above-max", "no-description", "no-name"],
)
def test_a_bad_parameter_row_is_named_at_the_field_and_nothing_is_saved(
    author_client, spec, row, message
):
    before = spec.document()

    response = author_client.post(
        change_url(spec), editor_data(spec, configurations=[row], description="Changed.")
    )

    assert response.status_code == 200
    assert message in response.context["adminform"].form.errors["configurations"][0]
    spec.refresh_from_db()
    assert spec.document() == before


def test_a_parameter_error_is_also_marked_at_its_box_in_the_editor(author_client, spec):
    rows = [
        {"name": "host", "type": "string", "description": "Host."},
        {"name": "timeout", "type": "integer", "description": "t", "default": "5", "min": 10},
    ]

    response = author_client.post(change_url(spec), editor_data(spec, configurations=rows))

    widget = response.context["adminform"].form.fields["configurations"].widget
    assert widget.error_map == {"1§default": ["default 5 is below min 10"]}
    assert "default 5 is below min 10" in widget.render("configurations", json.dumps(rows))


def test_two_parameters_of_one_name_are_refused(author_client, spec):
    row = {"name": "host", "type": "string", "description": "Host."}

    response = author_client.post(change_url(spec), editor_data(spec, configurations=[row, row]))

    assert "Two parameters are named 'host'" in page_text(response)
    assert spec.revisions.count() == 1


def test_example_payloads_are_edited_as_json_text(author_client, spec):
    rows = [
        {
            "name": "Ping",
            "description": "Ping a host.",
            "configurations": '{"host": "a.b"}',
            "input_example": "",
            "expected_output": '{\n  "alive": true\n}',
        }
    ]

    response = author_client.post(change_url(spec), editor_data(spec, examples=rows))

    assert response.status_code == 302, page_text(response)
    spec.refresh_from_db()
    assert spec.examples == [
        {
            "name": "Ping",
            "description": "Ping a host.",
            "configurations": {"host": "a.b"},
            "input_example": {},
            "expected_output": {"alive": True},
        }
    ]


def test_an_example_payload_that_is_not_json_is_refused_and_shown_again_as_typed(
    author_client, spec
):
    rows = [{"name": "Ping", "description": "Ping.", "input_example": "{host: a.b}"}]

    response = author_client.post(change_url(spec), editor_data(spec, examples=rows))

    assert response.status_code == 200
    assert "Example 1: input_example is not valid JSON" in page_text(response)
    shown = json.loads(response.context["adminform"].form["examples"].value())
    assert shown[0]["input_example"] == "{host: a.b}"
    assert spec.revisions.count() == 1


def test_the_change_page_renders_the_editors_from_the_package_s_own_files(author_client, spec):
    response = author_client.get(change_url(spec))

    text = page_text(response)
    for name in ("configurations", "input_params", "output_params", "examples", "tags"):
        assert f'id="id_{name}" name="{name}"' in text
        assert 'data-django-jsonform="' in text.split(f'id="id_{name}" name="{name}"')[1][:300]
    assert "/static/django_jsonform/react-json-form.js" in text
    assert "/static/django_jsonform/vendor/react.production.min.js" in text
    assert "://" not in text.split('<script src="', 1)[1].split('"', 1)[0]


def test_the_agent_preview_is_collapsed_under_a_summary(author_client, spec):
    text = page_text(author_client.get(change_url(spec)))

    details = text.split("<details>")[-1]
    assert "What an agent receives from get_node_details" in details.split("</summary>")[0]
    assert '<pre class="agent-preview">' in details


# Revisions


@pytest.fixture
def edited_spec(author_client, spec) -> NodeSpec:
    """The spec after a second save through the admin (revision 2 changes the description)."""
    document = spec.document() | {"description": "An edited description."}
    response = author_client.post(change_url(spec), form_data(document, shown=spec.document()))
    assert response.status_code == 302
    spec.refresh_from_db()
    return spec


def test_the_revisions_page_lists_who_changed_what_and_when(author_client, edited_spec):
    response = author_client.get(revisions_url(edited_spec))

    assert response.status_code == 200
    rows = page_text(response).split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>")[1:]
    assert len(rows) == 2
    newest, oldest = rows
    first = edited_spec.revisions.get(number=1)
    assert "<td>2</td>" in newest
    assert "Changed description" in newest
    assert "alice" in newest
    assert "current" in newest
    assert "<td>1</td>" in oldest
    assert first.created_at.strftime("%Y-%m-%d %H:%M:%S") in oldest
    assert "alice" in oldest
    assert 'value="Restore revision 1"' in oldest


def test_restoring_a_revision_brings_back_its_content_as_a_new_revision(
    author_client, author, edited_spec
):
    original = "Send an ICMP ping to a host and report whether it answered."

    response = author_client.post(restore_url(edited_spec, 1))

    assert response.status_code == 302
    assert response["Location"] == change_url(edited_spec)
    edited_spec.refresh_from_db()
    assert edited_spec.description == original
    latest = edited_spec.revisions.order_by("-number").first()
    assert latest.number == 3
    assert latest.comment == "Restored revision 1"
    assert latest.author == author
    assert latest.document == edited_spec.revisions.get(number=1).document


def test_a_get_on_the_restore_url_does_not_restore(author_client, edited_spec):
    response = author_client.get(restore_url(edited_spec, 1))

    assert response.status_code == 302
    assert response["Location"] == revisions_url(edited_spec)
    edited_spec.refresh_from_db()
    assert edited_spec.description == "An edited description."
    assert edited_spec.revisions.count() == 2


def test_restoring_a_revision_that_does_not_exist_is_not_found(author_client, spec):
    response = author_client.post(restore_url(spec, 99))

    assert response.status_code == 404
    assert spec.revisions.count() == 1


def test_a_revision_that_no_longer_validates_is_not_restored(author_client, edited_spec):
    first = edited_spec.revisions.get(number=1)
    broken = first.document | {"version": "one"}
    NodeSpecRevision.objects.filter(pk=first.pk).update(document=broken)

    response = author_client.post(restore_url(edited_spec, 1), follow=True)

    assert "no longer passes validation" in page_text(response)
    edited_spec.refresh_from_db()
    assert edited_spec.version == "1.0.0"
    assert edited_spec.description == "An edited description."
    assert edited_spec.revisions.count() == 2


# YAML export and import


def test_the_export_action_returns_yaml_that_reimports_unchanged(author_client, loaded_catalog):
    selected = list(NodeSpec.objects.all())
    response = author_client.post(
        CHANGELIST,
        {"action": "export_yaml", "_selected_action": [spec.pk for spec in selected]},
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml"
    assert "attachment" in response["Content-Disposition"]
    exported = response.content.decode()
    documents = yaml.safe_load(exported)
    assert sorted(document["subtype"] for document in documents) == sorted(
        spec.subtype for spec in selected
    )
    revisions_before = NodeSpecRevision.objects.count()

    reimport = author_client.post(IMPORT, {"text": exported})

    assert reimport.status_code == 200
    report = reimport.context["report"]
    assert report.summary() == f"0 created, 0 updated, {len(selected)} unchanged"
    assert NodeSpecRevision.objects.count() == revisions_before


def test_importing_yaml_creates_the_valid_spec_and_names_the_bad_field_of_the_other(
    author_client, author, db
):
    text = """
- node_type: ACTION
  subtype: PING_HOST
  description: Ping a host.
  configurations:
    host: {type: string, description: Host to ping., required: true}
- node_type: ACTION
  subtype: BROKEN_NODE
  description: A spec with a bad default.
  configurations:
    retries: {type: integer, description: Retries., default: many}
"""
    response = author_client.post(IMPORT, {"text": text})

    assert response.status_code == 200
    created = NodeSpec.objects.get(subtype="PING_HOST")
    assert created.source == NodeSpec.Source.CUSTOM
    assert created.revisions.get().author == author
    assert not NodeSpec.objects.filter(subtype="BROKEN_NODE").exists()
    text = page_text(response)
    assert "created ACTION/PING_HOST" in text
    assert (
        "failed #2 ACTION/BROKEN_NODE: configurations.retries: "
        "default 'many' is not of type integer"
    ) in text
    assert "Import: 1 created, 0 updated, 0 unchanged, 1 failed." in text


def test_importing_yaml_updates_an_existing_spec_and_keeps_a_revision(author_client, spec):
    text = yaml.safe_dump([spec.document() | {"version": "1.1.0"}])

    response = author_client.post(IMPORT, {"text": text})

    assert "updated ACTION/PING_HOST" in page_text(response)
    spec.refresh_from_db()
    assert spec.version == "1.1.0"
    assert spec.revisions.order_by("-number").first().comment == "Imported from YAML"


def test_importing_an_uploaded_yaml_file_works_like_pasting_it(author_client, db):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(
        "ping.yaml",
        b"node_type: ACTION\nsubtype: PING_HOST\ndescription: Ping a host.\n",
        content_type="application/yaml",
    )

    response = author_client.post(IMPORT, {"file": upload})

    assert response.status_code == 200
    assert NodeSpec.objects.filter(subtype="PING_HOST").exists()


def test_invalid_yaml_syntax_is_reported_clearly(author_client, db):
    response = author_client.post(IMPORT, {"text": "- node_type: ACTION\n  subtype: [unclosed\n"})

    assert response.status_code == 200
    assert "The file is not valid YAML" in page_text(response)
    assert response.context["report"] is None
    assert NodeSpec.objects.count() == 0


def test_yaml_that_is_not_a_spec_is_reported_clearly(author_client, db):
    response = author_client.post(IMPORT, {"text": "- just a string\n"})

    assert "Item 1 is a str, not a spec mapping." in page_text(response)
    assert NodeSpec.objects.count() == 0


def test_an_empty_import_asks_for_a_file_or_text(author_client, db):
    response = author_client.post(IMPORT, {"text": "   "})

    assert "Choose a YAML file or paste YAML." in page_text(response)


def test_a_legacy_spec_imports_and_is_normalised_to_configurations(author_client, db):
    text = """
type: ACTION_NODE
subtype: SEND_EMAIL
description: Send an email.
parameters:
  - name: to
    type: str
    required: true
    description: Recipient address.
  - name: priority
    type: enum
    required: false
    default_value: normal
    description: Delivery priority.
    enum_values: [low, normal, high]
"""
    response = author_client.post(IMPORT, {"text": text})

    assert "created ACTION/SEND_EMAIL" in page_text(response)
    spec = NodeSpec.objects.get(node_type="ACTION", subtype="SEND_EMAIL")
    assert spec.configurations == {
        "to": {
            "type": "string",
            "description": "Recipient address.",
            "required": True,
            "sensitive": False,
        },
        "priority": {
            "type": "string",
            "description": "Delivery priority.",
            "default": "normal",
            "required": False,
            "options": ["low", "normal", "high"],
            "sensitive": False,
        },
    }
    assert "parameters" not in spec.document()


# Who may do what


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("get", lambda spec: CHANGELIST),
        ("get", revisions_url),
        ("get", lambda spec: IMPORT),
        ("post", lambda spec: IMPORT),
        ("post", lambda spec: restore_url(spec, 1)),
    ],
    ids=["changelist", "revisions", "import-page", "import-post", "restore"],
)
def test_a_user_who_is_not_staff_is_sent_to_the_login_page(client, outsider, spec, method, target):
    client.force_login(outsider)
    url = target(spec)

    data = {"text": "node_type: ACTION\nsubtype: PING_HOST\ndescription: x\n"}

    response = getattr(client, method)(url, data if method == "post" else None)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert spec.revisions.count() == 1


def test_an_anonymous_visitor_is_sent_to_the_login_page(client, spec):
    response = client.get(revisions_url(spec))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_a_viewer_sees_the_revisions_without_restore_buttons(client, viewer, edited_spec):
    client.force_login(viewer)

    response = client.get(revisions_url(edited_spec))

    assert response.status_code == 200
    assert "Changed description" in page_text(response)
    assert "Restore revision" not in page_text(response)


def test_a_viewer_cannot_restore_a_revision(client, viewer, edited_spec):
    client.force_login(viewer)

    response = client.post(restore_url(edited_spec, 1))

    assert response.status_code == 403
    edited_spec.refresh_from_db()
    assert edited_spec.description == "An edited description."
    assert edited_spec.revisions.count() == 2


def test_a_viewer_cannot_import(client, viewer, db):
    client.force_login(viewer)
    text = "node_type: ACTION\nsubtype: PING_HOST\ndescription: Ping a host.\n"

    assert client.get(IMPORT).status_code == 403
    assert client.post(IMPORT, {"text": text}).status_code == 403
    assert not NodeSpec.objects.filter(subtype="PING_HOST").exists()


def test_a_viewer_cannot_save_changes_through_the_change_form(client, viewer, spec):
    client.force_login(viewer)
    document = spec.document() | {"description": "Vandalised."}

    response = client.post(change_url(spec), form_data(document, shown=spec.document()))

    assert response.status_code == 403
    spec.refresh_from_db()
    assert spec.description != "Vandalised."
