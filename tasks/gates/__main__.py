"""`python -m tasks.gates`: the command's gate runner (`tasks.gates.runner.serve_gates`)."""

from tasks.gates.runner import serve_gates

serve_gates()
