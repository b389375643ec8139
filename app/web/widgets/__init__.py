"""What the dashboard's pages draw and say: the charts and their notes, the form built from RunConfig, the
completions table, verdicts, empty states, error sentences and the start-up phases. A widget imports no page and no
server; the pages and the server import widgets."""
