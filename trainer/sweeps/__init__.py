"""A sweep's members tended while they train (issue 41): the pruning rules (:mod:`.prune`, pure functions over a
member's stored rows) and the pass that applies them to the running members of every active sweep and stops a
pruned one through the normal stop path (:mod:`.tending`, run by the dashboard's scheduler thread and by a
foreground ``grpo-studio sweep``).

A folder of its own above the supervisor and the insight rooms: the rules read the reward-hacking watch
(trainer/insight/watch.py) and the pass stops workers through trainer/supervise/, while trainer/insight already
reaches trainer/supervise/ (a learning report lists a run's checkpoints), so the supervisor can't import the watch
without the two folders importing each other. The supervisor's scheduler thread offers a hook for each pass
(``Scheduler.each_pass``); :class:`.tending.Scheduler` is the dashboard's, with the sweeps tended there.
"""
