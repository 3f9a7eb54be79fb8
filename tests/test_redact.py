"""The mask filter every view and push goes through (dh_cli/redact.py): what it hides, what it
leaves alone, and that its byte prefilter never lets a maskable text through unmasked."""

import pytest

from dh_cli.redact import MASK, mask, mask_bytes, may_hold_secret

HIDDEN = [
    ("token=abc123xyz", "abc123xyz"),
    ("GITHUB_TOKEN=gh-value-1234", "gh-value-1234"),
    ("refresh_tokens=abcdefgh123", "abcdefgh123"),
    ('MY_TOKENS="s3cr3tvalue"', "s3cr3tvalue"),
    ("{\"auth_tokens\": \"opaque-value\"}", "opaque-value"),
    ("export API_KEY='k-1234567'", "k-1234567"),
    ("password: hunter22", "hunter22"),
    ("curl -H 'Authorization: Bearer abcdefgh12345'", "abcdefgh12345"),
    ("key sk-ant-api03-abcdefghijklmnop", "abcdefghijklmnop"),
    # JSON inside a tool's output (`cat config.json`), its quotes escaped once or twice
    ('{"type":"tool_result","content":"{\\"password\\": \\"hunter2-x\\"}"}', "hunter2-x"),
    ('"arguments":"{\\"cmd\\":\\"echo {\\\\\\"api_key\\\\\\": \\\\\\"k-99887766\\\\\\"}\\"}"', "k-99887766"),
    ("{'secret': 'two words'}", "two words"),
    ('{"password": "with space"}', "with space"),
    # the same JSON in an HTML page (an export, dh serve), its quotes as entities
    ("{&quot;password&quot;: &quot;Json-pw 4411&quot;}", "Json-pw 4411"),
    ("{&#34;api_key&#34;: &#34;a&amp;b c&#34;}", "a&amp;b c"),
    ('"content":"line one\\nsk-ant-api03-abcdefghijklmnop"', "abcdefghijklmnop"),
    ('"output":"id\\nAKIAQ7ZXK2M4B5N6P7Q8\\n"', "Q7ZXK2M4B5N6P7Q8"),
    ('{"api_key": "abc\\ndefgh"}', "defgh"),
]

KEPT = [
    '{"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"output_tokens":25}}',
    '{"input_tokens": 123, "output_tokens":null}',
    '"input_tokens_details":{"cached_tokens":0}',
    '"max_tokens": "4096"',
    "500 tokens used, 20 tokens cached",
    "password: null",
    "&quot;max_tokens&quot;: &quot;4096&quot;",
    "the secret is in the sauce",
]


@pytest.mark.parametrize(("text", "secret"), HIDDEN)
def test_a_secret_valued_name_is_masked_in_text_and_bytes(text, secret):
    assert secret not in mask(text) and MASK in mask(text)
    assert may_hold_secret(text.encode())
    assert mask_bytes(text.encode()) == mask(text).encode()


@pytest.mark.parametrize("text", KEPT)
def test_counts_literals_and_prose_are_left_alone(text):
    assert mask(text) == text
    assert mask_bytes(text.encode()) == text.encode()


@pytest.mark.parametrize("text", [t for t, _ in HIDDEN] + KEPT)
def test_masking_is_idempotent(text):
    assert mask(mask(text)) == mask(text)


def test_usage_records_skip_the_substitutions():
    # the prefilter is what keeps a list of 10,000 sessions from masking every usage record
    assert not may_hold_secret(b'{"type":"assistant","usage":{"input_tokens":12,"output_tokens":null}}')
