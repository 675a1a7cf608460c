"""Running workflows: a call's run, executed directly or queued and followed from the caller's
side; its history recorded, its liveness, cancellation and reaping; its metrics and traces."""
