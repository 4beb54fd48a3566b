"""judgeline flows."""
