"""The completion cache: exact hits, typed-through hits, the hot streak, and what must miss."""
from quickcode.lsp_client.cache import CompletionCache


def test_exact_and_typed_through_hits_serve_the_rest():
    c = CompletionCache()
    c.put("def add(a, b):\n    return ", "\n", "a + b\n\ndef sub")
    assert c.get("def add(a, b):\n    return ", "\n").remainder == "a + b\n\ndef sub"
    hit = c.get("def add(a, b):\n    return a + ", "\n")
    assert hit.typed == 4 and hit.remainder == "b\n\ndef sub"


def test_hot_streak_serves_the_next_line_after_the_first_is_accepted():
    c = CompletionCache()
    c.put("for x in xs:\n    ", "", "total += x\n    count += 1\n")
    assert c.get("for x in xs:\n    total += x\n    ", "").remainder == "count += 1\n"


def test_typing_something_else_misses():
    c = CompletionCache()
    c.put("x = ", "\n", "foo(1)")
    assert c.get("x = fob", "\n") is None
    assert c.get("y = foo", "\n") is None


def test_a_changed_suffix_misses():
    c = CompletionCache()
    c.put("x = ", ")\n", "foo(1")
    assert c.get("x = ", ")\n") is not None
    assert c.get("x = ", "]\n") is None


def test_hits_are_verified_against_the_whole_prefix_not_only_the_key():
    c = CompletionCache()
    tail = "y" * 100
    c.put("AAA" + tail, "", "zz")
    assert c.get("BBB" + tail, "") is None     # same last 48 characters, different prefix
    assert c.get("AAA" + tail, "").remainder == "zz"


def test_fully_typed_completion_has_nothing_left_to_serve():
    c = CompletionCache()
    c.put("x = ", "", "1")
    assert c.get("x = 1", "") is None


def test_lru_bounds_memory():
    c = CompletionCache(max_keys=100)
    for i in range(1000):
        c.put(f"v{i} = ", "", "value_of_some_length")
    assert len(c.keys) <= 100


def test_keys_stay_small_on_a_long_line():
    from quickcode.lsp_client.cache import KEY_CHARS
    c = CompletionCache()
    head = "x" * 100_000                       # the rest of a minified line after the cursor
    c.put("a" * 5000, head, "foo(bar)")
    assert all(len(k) <= 2 * KEY_CHARS + 1 + len("foo(bar)") for k in c.keys.keys())
    assert c.get("a" * 5000 + "foo", head).remainder == "(bar)"
    assert c.get("a" * 5000 + "foo", head[:-1] + "y") is None       # verified against the whole head
