# Cross-check: renders the golden cases with Python's Jinja2, configured as transformers does
# (gemma's system message folded as llama.cpp does), and compares with golden/. Not run by go test.
# Run from anywhere: python3 jinja2_goldens.py (needs jinja2 and ../shared/models/templates).
import os, json, datetime, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError
HERE=os.path.dirname(os.path.abspath(__file__)); T=os.environ.get("HYBRID_TEST_MODELS", os.path.join(HERE, "../../../../shared/models"))+"/templates"; G=os.path.join(HERE, "golden")
tm={"HuggingFaceTB-SmolLM3-3B":("","<|im_end|>"),"Qwen-Qwen2.5-7B-Instruct":("","<|im_end|>"),"Qwen-Qwen3-0.6B":("","<|im_end|>"),
"deepseek-ai-DeepSeek-R1-Distill-Llama-8B":("<｜begin▁of▁sentence｜>","<｜end▁of▁sentence｜>"),"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B":("<｜begin▁of▁sentence｜>","<｜end▁of▁sentence｜>"),
"google-gemma-2-2b-it":("<bos>","<eos>"),"ibm-granite-granite-3.3-2B-Instruct":("","<|end_of_text|>"),"meta-llama-Llama-3.1-8B-Instruct":("<|begin_of_text|>","<|eot_id|>"),
"meta-llama-Llama-3.2-3B-Instruct":("<|begin_of_text|>","<|eot_id|>"),"microsoft-Phi-3.5-mini-instruct":("<s>","<|endoftext|>"),"mistralai-Mistral-Nemo-Instruct-2407":("<s>","</s>"),"unsloth-mistral-Devstral-Small-2507":("<s>","</s>")}
convs={"system-user":[("system","You are terse."),("user","Hello!")],"user":[("user","What is 2+2?")],
"multi-turn":[("user","Hi there"),("assistant","Hello! How can I help?"),("user","What is 2+2?")],
"system-multi-turn":[("system","Answer in French."),("user","Hi"),("assistant","Bonjour !"),("user","  Spaces \n around\n")],
"reasoning":[("user","Why?"),("assistant","<think>\nBecause.\n</think>\n\nIt is so."),("user","Thanks")],
"assistant-first":[("assistant","I start."),("user","Hi")]}
class RE(Exception): pass
def rexc(m): raise RE(m)
env=ImmutableSandboxedEnvironment(trim_blocks=True,lstrip_blocks=True,extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"]=lambda x,ensure_ascii=False,indent=None,separators=None,sort_keys=False: json.dumps(x,ensure_ascii=ensure_ascii,indent=indent,separators=separators,sort_keys=sort_keys)
env.globals["raise_exception"]=rexc
env.globals["strftime_now"]=lambda f: datetime.datetime(2024,7,26,12).strftime(f)
same=diff=0
for n,(bos,eos) in tm.items():
  t=env.from_string(open(f"{T}/{n}.jinja").read())
  for c,msgs in convs.items():
    ms=[{"role":r,"content":x} for r,x in msgs]
    if n.startswith("google") and ms[0]["role"]=="system":
      ms=[{"role":ms[1]["role"],"content":ms[0]["content"]+"\n"+ms[1]["content"]}]+ms[2:]
    for gen in (True,False):
      base=f"{G}/{n}/{c}-gen={'true' if gen else 'false'}"
      try: out=t.render(messages=ms,add_generation_prompt=gen,bos_token=bos,eos_token=eos,date_string="26 Jul 2024",datetime="26 Jul 2024",enable_thinking=True)
      except RE as e: out="ERR "+str(e)
      if os.path.exists(base+".txt"): want=open(base+".txt",encoding="utf-8",newline="").read()
      else: want="ERR "+open(base+".err").read().split("Jinja Exception: ")[1].strip()
      if out==want: same+=1
      else:
        diff+=1; print("DIFF",n,c,gen); print(" jinja2:",repr(out)); print(" llama :",repr(want))
print("same",same,"diff",diff)
