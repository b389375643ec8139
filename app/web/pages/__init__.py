"""The dashboard's pages: one module each, callbacks at the top, layout and wiring in ``build()`` at the bottom."""
