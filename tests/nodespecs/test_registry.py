"""The registry follows the catalog table: an edit is visible at the next query."""

import time

from nodespecs import snapshots
from nodespecs.knowledge import registry
from nodespecs.knowledge.service import get_node_details, get_node_types, search_nodes
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec


def new_spec(**fields) -> NodeSpec:
    return NodeSpec(
        node_type="ACTION", subtype="PING", description="Send a ping to a host.", **fields
    )


def test_a_new_spec_is_found_after_it_is_committed(db, django_capture_on_commit_callbacks):
    assert get_node_types("ACTION").node_types == {"ACTION": []}
    with django_capture_on_commit_callbacks(execute=True):
        spec_save(spec=new_spec())
    assert get_node_types("ACTION").node_types == {"ACTION": ["PING"]}
    assert search_nodes("ping a host")[0]["subtype"] == "PING"


def test_an_edit_is_served_at_the_next_query(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        spec = new_spec()
        spec_save(spec=spec)
    assert get_node_details([{"node_type": "ACTION", "subtype": "PING"}])[0]["version"] == "1.0.0"
    with django_capture_on_commit_callbacks(execute=True):
        spec.version = "1.1.0"
        spec_save(spec=spec)
    assert get_node_details([{"node_type": "ACTION", "subtype": "PING"}])[0]["version"] == "1.1.0"


def test_a_deleted_spec_disappears(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        spec = new_spec()
        spec_save(spec=spec)
    get_node_types()
    with django_capture_on_commit_callbacks(execute=True):
        spec.delete()
    assert get_node_types("ACTION").node_types == {"ACTION": []}


def test_queries_reuse_the_registry_without_touching_the_database(
    db, django_assert_num_queries, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        spec_save(spec=new_spec())
    get_node_types()
    with django_assert_num_queries(0):
        get_node_details([{"node_type": "ACTION", "subtype": "PING"}])
        search_nodes("ping")


def test_a_change_made_without_notice_is_seen_from_the_table(db, monkeypatch):
    """Another process (or a bulk load) changed the table and this cache heard nothing."""
    monkeypatch.setattr("nodespecs.snapshots.TABLE_CHECK_SECONDS", 0.0)
    assert get_node_types("ACTION").node_types == {"ACTION": []}
    NodeSpec.objects.bulk_create([new_spec()])
    assert get_node_types("ACTION").node_types == {"ACTION": ["PING"]}


def test_the_registry_is_due_a_margin_before_it_would_query(db, monkeypatch):
    """A request let into the event loop must not reach the table check while it runs."""
    registry.current_registry()
    snapshot = registry._snapshot
    now = time.monotonic()
    almost_due = snapshots.TABLE_CHECK_SECONDS - snapshots.CHECK_MARGIN_SECONDS / 2
    monkeypatch.setattr(snapshot, "_checked_at", now - almost_due)
    assert registry.needs_database()
    monkeypatch.setattr(snapshot, "_checked_at", now - almost_due + snapshots.CHECK_MARGIN_SECONDS)
    assert not registry.needs_database()


def test_the_generation_is_read_from_the_cache_once_in_a_while(
    db, monkeypatch, django_capture_on_commit_callbacks
):
    """With Redis each read is a round trip: a process looks at the generation many times per
    request, and reads it at most every GENERATION_READ_SECONDS. Its own changes are seen
    at once; another instance's (here: the cache's key set behind its back) in that time."""
    reads: list[str] = []
    real_get = snapshots.cache.get

    def counted_get(key, *args, **kwargs):
        reads.append(key)
        return real_get(key, *args, **kwargs)

    monkeypatch.setattr(snapshots.cache, "get", counted_get)
    get_node_types()
    reads.clear()
    for _ in range(20):
        get_node_types()
        registry.needs_database()
    assert reads == []

    with django_capture_on_commit_callbacks(execute=True):
        spec_save(spec=new_spec())
    assert get_node_types("ACTION").node_types == {"ACTION": ["PING"]}

    # Another instance announces a change of its own.
    snapshots.cache.set(registry.GENERATION_KEY, "another-instance")
    NodeSpec.objects.filter(subtype="PING").update(description="Ping a host, twice.")
    time.sleep(snapshots.GENERATION_READ_SECONDS)
    details = get_node_details([{"node_type": "ACTION", "subtype": "PING"}])[0]
    assert details["description"] == "Ping a host, twice."
    assert registry.GENERATION_KEY in reads
