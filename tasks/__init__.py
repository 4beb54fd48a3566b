"""judgeline tasks."""
