#!/usr/bin/env python3
"""Issue 28: how much of a chat's next turn starts with the previous turn's prompt and answer
(the prefix cache's reuse), as the V4 recipe renders it: non-thinking, thinking with earlier
reasoning dropped (the default), thinking with it kept. Runs build/bin/dsinfer on models/demo.
"""
import json, subprocess, sys
import os
ROOT=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B=ROOT+'/build/bin/dsinfer'; M=ROOT+'/models/demo'
os.chdir(os.environ.get('TMPDIR', '/tmp'))
def render(msgs, thinking, keep=False):
    json.dump(msgs, open('m.json','w'))
    args=[B,'render','--messages-file','m.json','--model',M,'--thinking','thinking' if thinking else 'chat']
    if keep: args.append('--keep-thinking')
    return json.loads(subprocess.check_output(args))['ids']
def generate(msgs, thinking):
    req={"messages":msgs,"max_tokens":40,"temperature":0.7,"seed":1}
    if thinking: req["chat_template_kwargs"]={"thinking":True}
    open('in.jsonl','w').write(json.dumps(req)+"\n")
    out=json.loads(subprocess.check_output([B,'generate','--model',M,'--input','in.jsonl','--quiet','--no-prefix-cache'],stderr=subprocess.DEVNULL))
    ch=out['choices'][0]
    return ch['ids'], ch.get('message',{})
for thinking in (False, True):
  for keep in ((False, True) if thinking else (False,)):
    msgs=[{"role":"system","content":"You answer questions about Debian."},{"role":"user","content":"How do I install a package?"}]
    p1=render(msgs, thinking, keep)
    ids, msg = generate(msgs, thinking)
    full=p1+ids
    amsg={"role":"assistant","content":msg.get('content','')}
    if msg.get('reasoning_content'): amsg['reasoning_content']=msg['reasoning_content']
    msgs2=msgs+[amsg,{"role":"user","content":"And how do I remove it?"}]
    p2=render(msgs2, thinking, keep)
    common=0
    while common<min(len(full),len(p2)) and full[common]==p2[common]: common+=1
    print(json.dumps({"thinking":thinking,"keep_thinking":keep,"turn1_prompt":len(p1),"turn1_prompt_plus_answer":len(full),"turn2_prompt":len(p2),"common_prefix":common,"reusable_fraction_of_turn2":round(common/len(p2),3), "answer_has_reasoning": bool(msg.get('reasoning_content'))}))
