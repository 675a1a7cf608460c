"""What operators see of requests: metrics, JSON log lines and OpenTelemetry spans."""
