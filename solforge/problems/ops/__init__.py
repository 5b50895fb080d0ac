"""Op builders: each returns a ProblemDraft (definition + workloads) for one op or block at given sizes."""
