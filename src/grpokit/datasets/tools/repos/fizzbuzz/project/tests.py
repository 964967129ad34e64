assert fizzbuzz(3) == "Fizz"
assert fizzbuzz(15) == "FizzBuzz"
