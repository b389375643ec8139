"""Tools and environments a run gives the model (issue 42): the built-ins (:mod:`.builtin`), the time limit on each
call (:mod:`.limits`), what a run's settings name, loaded for GRPOTrainer (:mod:`.loading`), and a tool run's
completion as its turns (:mod:`.turns`). The rules that check them before a launch are trainer.config.review.tools."""
