"""Where a run stops and how it goes on, with nothing held in between: an approval node's
wait (approvals, and the forms a person fills in: approval_forms), a breakpoint, and a run
that goes on from a node (resuming)."""
