import json, datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
env=ImmutableSandboxedEnvironment(trim_blocks=True,lstrip_blocks=True,extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"]=lambda x,ensure_ascii=False,indent=None,separators=None,sort_keys=False: json.dumps(x,ensure_ascii=ensure_ascii,indent=indent,separators=separators,sort_keys=sort_keys)
cases = {
"strip": '{{ "  a b \\n".strip() }}|{{ "xxaxx".strip("x") }}|{{ "\\n\\nhi".lstrip("\\n") }}|{{ "hi  \\t".rstrip() }}|{{ " hi".lstrip() }}',
"split": '{{ " a  b ".split() | tojson }}|{{ "a,b,,c".split(",") | tojson }}|{{ "a b  c".split(None, 1) | tojson }}|{{ "a b c".rsplit(" ", 1) | tojson }}|{{ " a b c ".rsplit(None, 1) | tojson }}|{{ "x</think>y".split("</think>")[-1] }}',
"replace": '{{ "aaa".replace("a", "b", 2) }}|{{ "aaa".replace("a", "b") }}|{{ "abc".replace("", "-") }}',
"affix": '{{ "abc".startswith(("x", "a")) }}|{{ "abc".endswith("bc") }}|{{ "abc".startswith("b") }}',
"slice": '{{ [1,2,3][::-1] | tojson }}|{{ "abc"[::-1] }}|{{ "abcd"[1:3] }}|{{ [1,2,3][-1] }}',
"namespace-loop": '{% set ns = namespace(n=0, last="") %}{% for i in range(6) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{% set ns.n = ns.n + i %}{% set ns.last = loop.index ~ "/" ~ loop.length %}{% endfor %}{{ ns.n }} {{ ns.last }}',
"tests": '{{ x is defined }}|{{ y is defined }}|{{ none is none }}|{{ "s" is string }}|{{ {"a": 1} is mapping }}|{{ [1] is iterable }}|{{ 1 is string }}',
"tojson": '{{ {"a": {"x": 1.0, "y": 2}, "b": [1, 2.5, "é\\n\\"", none, true, false]} | tojson }}',
"tojson-indent": '{{ [1, {"k": "v"}] | tojson(indent=2) }}',
"tojson-ascii": '{{ "é😀" | tojson(ensure_ascii=true) }}',
"filters": '{{ [3,1,2] | length }}|{{ ["a","b"] | join(", ") }}|{{ "  t  " | trim }}|{{ [{"n":1},{"n":2}] | selectattr("n", "equalto", 2) | list | length }}|{{ 5 | string }}',
"items": '{% for k, v in {"a": 1, "b": 2}.items() %}{{ k }}={{ v }};{% endfor %}',
"whitespace": 'A\n  {% if true %}\n  B\n  {% endif %}\nC {{- " D " -}} E\n',
}
# Run: python3 jinja2_cases.py > jinja2_cases.jsonl (Jinja2 3.1, configured as transformers does).
for k,v in cases.items():
  print(json.dumps([k, v, env.from_string(v).render(x=1)], ensure_ascii=False))
