"""Runs: their folders, records, configurations, health and the checks made before one starts."""
