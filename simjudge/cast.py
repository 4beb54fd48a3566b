"""The personas a simulated judge serves, picked by a request's `model`, and their faults."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simjudge.persona import Faults, Persona
from simjudge.rules import is_vendor_model

__all__ = ["Cast"]


class Cast:
    """Personas by name, the faults of each, and the stand-in that answers a vendor's model
    name no persona has (None: such a name is a 404)."""

    def __init__(self, personas: Sequence[Persona], stand_in: Persona | None) -> None:
        names = [p.name for p in personas]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"persona names must be present and unique: {names}")
        self.personas: dict[str, Persona] = {p.name: p for p in personas}
        self.faults: dict[str, Faults] = {p.name: p.faults for p in personas}
        self._stand_in = stand_in

    def persona(self, model: object) -> Persona | None:
        """The persona `model` picks: the one of that name, else, for a vendor's model name
        (`is_vendor_model`), the stand-in under that name, which then refuses what that
        model's API refuses; None otherwise."""
        if not isinstance(model, str):
            return None
        found = self.personas.get(model)
        if found is None and self._stand_in is not None and is_vendor_model(model):
            found = self._stand_in.model_copy(update={"name": model})
            self.personas[model], self.faults[model] = found, found.faults
        return found

    def set_faults(self, persona: str | None = None, **rates: Any) -> dict[str, Faults]:
        """Change fault settings of one persona (or all, the stand-in's too)."""
        targets = [persona] if persona is not None else list(self.faults)
        for name in targets:
            if name not in self.faults:
                raise ValueError(f"unknown persona {name!r}; known: {sorted(self.faults)}")
        self.faults.update(
            {
                name: Faults.model_validate({**self.faults[name].model_dump(), **rates})
                for name in targets
            }
        )
        if persona is None and self._stand_in is not None:
            faults = Faults.model_validate({**self._stand_in.faults.model_dump(), **rates})
            self._stand_in = self._stand_in.model_copy(update={"faults": faults})
        return dict(self.faults)
