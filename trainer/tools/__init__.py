"""Tools and environments a run gives the model (issue 42): the built-ins (:mod:`.builtin`), the limit on each call
(:mod:`.limits`: a tool's failure as its answer) enforced by the run's tool process (:mod:`.process`, with its own
side in :mod:`.child`), what a run's settings name, loaded for GRPOTrainer (:mod:`.loading`), and a tool run's
completion as its turns (:mod:`.turns`). The rules that check them before a launch are trainer.review.tools."""
