"""The dashboard: its server (server.py), its API's wiring (api.py), its pages (pages/) and the widgets, charts and
text they draw. It acts through app/actions/ and the verb table (app/actions/verbs.py), never storage/ or trainer/ directly."""
