def slugify(title):
    """'Hello World' -> 'hello-world': lower case, words joined by '-'."""
    words = title.split()
    return "-".join(words)
