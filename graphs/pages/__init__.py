"""The reviewer history pages: runs, a run's detail, workflows (docs/history.md)."""
