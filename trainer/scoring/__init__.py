"""Scoring completions: the reward functions and their registry, custom rewards, and the code_tests reward's
sandbox (the isolated process, its system-call filter, and the judge that decides each test outside it)."""
