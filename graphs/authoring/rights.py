"""Who may change, publish and test the workflows of a group, through the API.

A workflow group has owners: users (a key acts for the user who owns it) and, for a group an
API key without an owner created, that key. Its owners, and keys with `workflows:admin` (the
operators' tools), may create workflows in it, change them and publish them; publishing
also needs the key's `workflows:publish` scope, which the tool itself asks for. Everyone
else is refused, naming the owners and the right needed. A group without owners (what
`import_graph` made) is the operators' alone.

People in the admin and operators' commands are not API callers: their rights are Django's
permissions and the host's, so nothing here refuses them.
"""

from __future__ import annotations

from graphs.models import Workflow, WorkflowGroup
from nodespecs.callers import Caller

ADMIN_SCOPE = "workflows:admin"


def group_owned_by(group: WorkflowGroup, caller: Caller) -> bool:
    """Whether `caller` is an owner of `group`: its user is, or it is the key that owns it."""
    if group.owner_key and group.owner_key == caller.actor:
        return True
    user_id = caller.user_id
    return user_id is not None and group.owners.filter(pk=user_id).exists()


def group_owner_names(group: WorkflowGroup) -> str:
    """The owners as a refusal names them."""
    names = [user.get_username() for user in group.owners.all()]
    if group.owner_key:
        names.append(group.owner_key)
    return ", ".join(names) or "none: it is the operators' group"


def group_change_refusal(group: WorkflowGroup, caller: Caller, doing: str) -> str | None:
    """Why `caller` may not do `doing` (e.g. "change workflows") in `group`, or None."""
    if not caller.is_api_caller or caller.has_scope(ADMIN_SCOPE) or group_owned_by(group, caller):
        return None
    return (
        f"This key ({caller.trail_name}) may not {doing} in the workflow group "
        f"{group.name!r}: that is for its owners ({group_owner_names(group)}) and for keys with "
        f"the scope {ADMIN_SCOPE}. Build in a group of your own (a new server.name), or ask an "
        "owner to add your user to the group's owners in the admin."
    )


def run_change_refusal(run_id: int, caller: Caller, doing: str) -> str | None:
    """Why `caller` may not do `doing` with the workflow run `run_id` ran, as a builder of
    its group may (the scope workflows:write and the group's ownership), or None; None too
    for a run that does not exist (whoever asks says so)."""
    workflow = Workflow.objects.filter(runs__pk=run_id).select_related("group").first()
    if workflow is None:
        return None
    if caller.is_api_caller and not caller.has_scope("workflows:write"):
        return (
            f"This key ({caller.trail_name}) may not {doing}: that needs the scope "
            f"workflows:write and the ownership of the workflow group {workflow.group.name!r}."
        )
    return group_change_refusal(workflow.group, caller, doing)


def group_take_ownership(group: WorkflowGroup, caller: Caller) -> None:
    """Make `caller` the owner of the new `group` it created: its user, or else (a key
    without an owner) the key itself. Operators' commands leave the group without owners."""
    if caller.user_id is not None:
        group.owners.add(caller.user_id)
    elif caller.is_api_caller:
        group.owner_key = caller.actor
        group.save(update_fields=["owner_key"])
