def fizzbuzz(n):
    """'FizzBuzz' for multiples of 15, 'Fizz' of 3, 'Buzz' of 5, else the number as text."""
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    if n % 15 == 0:
        return "FizzBuzz"
    return str(n)
