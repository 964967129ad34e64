assert mean([2, 4]) == 3
assert mean([]) == 0
