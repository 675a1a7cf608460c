"""Runs that stand still before a node and go on from it, in any process: the state they
keep (saved_state), sending them on (going_on), a test run paused at a breakpoint (pauses,
breakpoints) and a re-run from a recorded run's node (reruns). Runs waiting at an approval
node are ../approvals/, built on the same state and the same going on."""
