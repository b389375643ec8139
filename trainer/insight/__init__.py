"""Reading a run for what its model learns: the per-prompt learning map and the reward-hacking watch. Pure
functions of stored rows (storage/learning.py reads them); no torch, so the dashboard imports them."""
