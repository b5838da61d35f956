// The official openai npm client against a running `hybrid serve`, whose
// base URL (ending in /v1) is in HYBRID_BASE_URL. run.sh starts one on the
// built-in model and runs this with `node --test`.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import OpenAI from 'openai';

const baseURL = process.env.HYBRID_BASE_URL;
if (!baseURL) {
  throw new Error('HYBRID_BASE_URL is not set: give the base URL of a running hybrid serve, e.g. http://127.0.0.1:8080/v1');
}
// No retries: a refused request must fail the test, not be hidden.
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
let model;

before(async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1, 'one model is served');
  model = list.data[0].id;
  assert.equal(list.data[0].object, 'model');
});

// chat returns a non-streamed chat completion.
function chat(content, extra = {}) {
  return client.chat.completions.create({
    model, messages: [{ role: 'user', content }], temperature: 0, max_tokens: 32, ...extra,
  });
}

// chatStream reads a streamed chat completion into its text, finish
// reason and usage (asked for with include_usage).
async function chatStream(content, extra = {}) {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content }], temperature: 0, max_tokens: 32,
    stream: true, stream_options: { include_usage: true }, ...extra,
  });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      role ??= c.delta.role ?? null;
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role };
}

async function completionStream(prompt, extra = {}) {
  const stream = await client.completions.create({
    model, prompt, temperature: 0, max_tokens: 32, stream: true, ...extra,
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish };
}

function checkUsage(usage, maxCompletion) {
  assert.ok(usage.prompt_tokens > 0, 'prompt_tokens');
  assert.ok(usage.completion_tokens > 0 && usage.completion_tokens <= maxCompletion, 'completion_tokens');
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

test('chat, not streamed', async () => {
  const r = await chat('Tell me a story.');
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  checkUsage(r.usage, 32);
});

test('chat, streamed, equals the same request not streamed', async () => {
  const whole = await chat('Tell me a story.');
  const s = await chatStream('Tell me a story.');
  assert.equal(s.role, 'assistant');
  assert.equal(s.text, whole.choices[0].message.content);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  assert.deepEqual(s.usage, whole.usage);
});

test('completions, streamed and not', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 24 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 24);
  assert.ok(r.choices[0].text.length > 0);
  const s = await completionStream('Once upon a time', { max_tokens: 24 });
  assert.equal(s.text, r.choices[0].text);
  assert.equal(s.finish, 'length');
});

test('stop sequences', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 60 });
  const full = r.choices[0].text;
  // A word from the middle of the greedy text, and one that never comes.
  const words = full.split(/\s+/).filter((w) => /^[a-z]{3,}$/.test(w));
  assert.ok(words.length >= 3, `too few words in ${JSON.stringify(full)}`);
  const stop = words[2];
  const want = full.slice(0, full.indexOf(stop));
  for (const stopField of [stop, [stop, 'zebra-never'], ['zebra-never', stop]]) {
    const cut = await client.completions.create({ model, prompt: 'Once upon a time', temperature: 0, max_tokens: 60, stop: stopField });
    assert.equal(cut.choices[0].text, want);
    assert.equal(cut.choices[0].finish_reason, 'stop');
    const s = await completionStream('Once upon a time', { max_tokens: 60, stop: stopField });
    assert.equal(s.text, want);
    assert.equal(s.finish, 'stop');
  }
  const chatFull = await chat('Hello', { max_tokens: 60 });
  const chatWords = chatFull.choices[0].message.content.split(/\s+/).filter((w) => /^[a-z]{3,}$/.test(w));
  if (chatWords.length > 0) {
    const c = chatWords[0];
    const content = chatFull.choices[0].message.content;
    const s = await chatStream('Hello', { max_tokens: 60, stop: c });
    assert.equal(s.text, content.slice(0, content.indexOf(c)));
    assert.equal(s.finish, 'stop');
  }
});

test('8 concurrent streams each equal a single request', async () => {
  const prompts = [
    'Once upon a time', 'Lily wanted to play', 'The sun was hot', 'Tom had a red ball',
    'One day, a cat', 'The little bird sang', 'Mom said no', 'A big dog ran',
  ];
  const single = [];
  for (const p of prompts) {
    single.push(await chatStream(p, { max_tokens: 48 }));
  }
  const together = await Promise.all(prompts.map((p) => chatStream(p, { max_tokens: 48 })));
  for (let i = 0; i < prompts.length; i++) {
    assert.equal(together[i].text, single[i].text, `stream ${i} (${prompts[i]})`);
    assert.equal(together[i].finish, single[i].finish);
    assert.deepEqual(together[i].usage, single[i].usage);
  }
  // The prompts differ, and so do most answers: the streams were not mixed up.
  assert.ok(new Set(together.map((s) => s.text)).size > 4);
});

test('errors come back as OpenAI errors', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'Hi' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === 'model_not_found',
  );
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], n: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'n',
  );
});
