assert slugify("hello world") == "hello-world"
assert slugify("Hello World") == "hello-world"
