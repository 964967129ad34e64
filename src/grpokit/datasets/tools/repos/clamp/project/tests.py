assert clamp(5, 0, 10) == 5
assert clamp(-3, 0, 10) == 0
