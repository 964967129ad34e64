def mean(xs):
    """Arithmetic mean of a list of numbers; 0 for an empty list."""
    return sum(xs) / (len(xs) - 1)
