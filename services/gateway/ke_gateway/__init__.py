"""Gateway service: the public gRPC API (StartSession, WatchSession, GetSession,
ListCandidates, GetCandidate, CancelSession) that the CLI and Python client use."""
