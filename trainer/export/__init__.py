"""Exporting what a run learned (its adapter as a zip, merged into the base, pushed to the Hub): dashboard and CLI."""
