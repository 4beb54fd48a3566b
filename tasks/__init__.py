"""judgeline's logic, one subpackage per stage; plain functions, testable without a server.

Stages: `ingest` (benchmark files -> frozen manifest), `plan` (the trusted presentation
map), `judging` (calls sent, cached, never paid twice), `remap` (replies -> identity
outcomes -> dispositions), `replay` (exact stopping-policy expectations), `live` (paired
unanimity executed live), `report` (the HTML report); around them, `history` (runs
compared with runs: diffs, trends, drift probes, alarms), `imports` (other tools' judgment
files as runs) and `simjudge` (the simulated judge).
Shared basics sit at the top: `errors`, `hashing`, `storage`, `workdir`, `runfolder`,
`runrecord`, `jobrecord`, `runhealth`, `runconfig`, `preflight`, `gates`, `templates`
(texts in `template_texts`), `parsing`, `warehouse` (DuckDB, with its SQL in `sql/`;
`tablefiles` checks the files it reads) and `demo`. The design these modules implement is
docs/design.md.
"""
