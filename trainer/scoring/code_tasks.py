"""``builtin:code``: a dozen small programming problems with unit tests, written for grpo-studio, so the
``code_tests`` reward has something to run offline. Each test is a plain ``assert`` on the named function."""

from __future__ import annotations

CODE_PROBLEMS: list[dict] = [
    {
        "question": "Write a Python function two_sum(nums, target) that returns the indices [i, j] (i < j) of the two numbers that add up to target, in O(N).",
        "answer": "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n        if target - x in seen:\n            return [seen[target - x], j]\n        seen[x] = j",
        "tests": [
            "assert two_sum([2, 7, 11, 15], 9) == [0, 1]",
            "assert two_sum([3, 2, 4], 6) == [1, 2]",
            "assert two_sum([3, 3], 6) == [0, 1]",
            "assert two_sum([-1, -2, -3, -4, -5], -8) == [2, 4]",
        ],
    },
    {
        "question": "Write a Python function reverse_words(s) that returns the words of s in reverse order, separated by single spaces.",
        "answer": "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
        "tests": [
            "assert reverse_words('the sky is blue') == 'blue is sky the'",
            "assert reverse_words('  hello world  ') == 'world hello'",
            "assert reverse_words('a') == 'a'",
        ],
    },
    {
        "question": "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for 5, 'FizzBuzz' for both, else the number.",
        "answer": "def fizzbuzz(n):\n    return ['FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else str(i) for i in range(1, n + 1)]",
        "tests": [
            "assert fizzbuzz(3) == ['1', '2', 'Fizz']",
            "assert fizzbuzz(15)[-1] == 'FizzBuzz'",
            "assert fizzbuzz(5)[4] == 'Buzz'",
            "assert fizzbuzz(0) == []",
        ],
    },
    {
        "question": "Write a Python function is_palindrome(s) that tells whether s reads the same backwards, ignoring case and non-alphanumeric characters.",
        "answer": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]",
        "tests": [
            "assert is_palindrome('A man, a plan, a canal: Panama')",
            "assert not is_palindrome('race a car')",
            "assert is_palindrome('')",
        ],
    },
    {
        "question": "Write a Python function max_subarray(nums) that returns the largest sum of a contiguous non-empty subarray.",
        "answer": "def max_subarray(nums):\n    best = cur = nums[0]\n    for x in nums[1:]:\n        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best",
        "tests": [
            "assert max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6",
            "assert max_subarray([1]) == 1",
            "assert max_subarray([-3, -1, -2]) == -1",
        ],
    },
    {
        "question": "Write a Python function fib(n) that returns the n-th Fibonacci number (fib(0) = 0, fib(1) = 1) in O(n) time.",
        "answer": "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        "tests": [
            "assert fib(0) == 0",
            "assert fib(1) == 1",
            "assert fib(10) == 55",
            "assert fib(90) == 2880067194370816120",
        ],
    },
    {
        "question": "Write a Python function is_prime(n) that tells whether the integer n is prime.",
        "answer": "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True",
        "tests": [
            "assert is_prime(2) and is_prime(13) and is_prime(7919)",
            "assert not is_prime(1) and not is_prime(0) and not is_prime(-7)",
            "assert not is_prime(91)",
        ],
    },
    {
        "question": "Write a Python function gcd(a, b) that returns the greatest common divisor of two non-negative integers.",
        "answer": "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
        "tests": ["assert gcd(12, 18) == 6", "assert gcd(17, 5) == 1", "assert gcd(0, 9) == 9"],
    },
    {
        "question": "Write a Python function count_vowels(s) that counts the vowels (a, e, i, o, u, either case) in s.",
        "answer": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
        "tests": [
            "assert count_vowels('Hello World') == 3",
            "assert count_vowels('xyz') == 0",
            "assert count_vowels('AEIOUaeiou') == 10",
        ],
    },
    {
        "question": "Write a Python function flatten(items) that flattens arbitrarily nested lists into one flat list.",
        "answer": "def flatten(items):\n    out = []\n    for x in items:\n        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out",
        "tests": [
            "assert flatten([1, [2, [3, [4]], 5]]) == [1, 2, 3, 4, 5]",
            "assert flatten([]) == []",
            "assert flatten([[[]]]) == []",
        ],
    },
    {
        "question": "Write a Python function is_anagram(a, b) that tells whether a and b contain the same letters in a different order (case-sensitive).",
        "answer": "def is_anagram(a, b):\n    return sorted(a) == sorted(b)",
        "tests": [
            "assert is_anagram('listen', 'silent')",
            "assert not is_anagram('rat', 'car')",
            "assert is_anagram('', '')",
        ],
    },
    {
        "question": "Write a Python function valid_parentheses(s) that tells whether the brackets ()[]{} in s are balanced and properly nested.",
        "answer": "def valid_parentheses(s):\n    pairs, stack = {')': '(', ']': '[', '}': '{'}, []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack",
        "tests": [
            "assert valid_parentheses('()[]{}')",
            "assert not valid_parentheses('(]')",
            "assert valid_parentheses('{[()]}')",
            "assert not valid_parentheses('((')",
        ],
    },
]
