// Checks every .github/workflows/*.yml: it parses as YAML (no duplicate keys), has GitHub
// Actions' structure (name, on with known events, jobs with runs-on and steps, each step one
// `uses: action@ref` or one `run:`), and calls only what the repository has. A run script's
// paths under scripts/, .ci/, tests/, tools/ and models/ must exist, except the scripts other
// issues are writing (FUTURE below); ci.yml's placeholders for those are guarded by
// `if: hashFiles('PATH') != ''` (a step condition: hashFiles is not available in a job's `if`).
// Like the README, the workflows build and test through the project's scripts (scripts/setup.sh,
// .ci/run, scripts/test_all_isas.sh, ...), never with their own apt-get/cmake/ctest/npm/pip line,
// and pass workflow inputs and event fields to scripts through env, not spliced into the script.
// Project rules: ci.yml runs .ci/run and a preset matrix that covers every configure preset of
// CMakePresets.json; release.yml checks the tag with tests/release/versions.mjs --tag.
//
//   node tests/release/workflows.mjs [--root DIR]
//
// Exit 0, 1 with one line per problem, 77 (skipped) without the npm packages.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROG = 'workflows.mjs';
let YAML;
try {
  YAML = await import('yaml');
} catch {
  console.error(`${PROG}: skipped: npm packages missing (npm ci in tests/release: scripts/setup.sh --tests)`);
  process.exit(77);
}

// Scripts that other issues are writing; guard: whether a call must be guarded while absent
// (release.yml must fail without package.sh rather than publish nothing).
export const FUTURE = {
  'scripts/package.sh': { guard: false },
  'scripts/test_windows.sh': { guard: true },
  'scripts/test_sanitizers.sh': { guard: true },
};

const EVENTS = new Set([
  'branch_protection_rule', 'check_run', 'check_suite', 'create', 'delete', 'deployment',
  'deployment_status', 'discussion', 'discussion_comment', 'fork', 'gollum', 'issue_comment',
  'issues', 'label', 'merge_group', 'milestone', 'page_build', 'public', 'pull_request',
  'pull_request_review', 'pull_request_review_comment', 'pull_request_target', 'push',
  'registry_package', 'release', 'repository_dispatch', 'schedule', 'status', 'watch',
  'workflow_call', 'workflow_dispatch', 'workflow_run',
]);
const TOP_KEYS = new Set(['name', 'run-name', 'on', 'permissions', 'env', 'defaults', 'concurrency', 'jobs']);
const JOB_KEYS = new Set([
  'name', 'permissions', 'needs', 'if', 'runs-on', 'environment', 'concurrency', 'outputs', 'env',
  'defaults', 'steps', 'timeout-minutes', 'strategy', 'continue-on-error', 'container', 'services',
  'uses', 'with', 'secrets',
]);
const STEP_KEYS = new Set([
  'id', 'if', 'name', 'uses', 'run', 'shell', 'with', 'env', 'continue-on-error', 'timeout-minutes',
  'working-directory',
]);
// A repository path at a word start in a run script (not inside another path or a variable).
const PATH_RE = /(?<![\w./$~-])((?:scripts|\.ci|tests|tools|models)\/[\w.\/-]*[\w-])/g;
// Build and install commands that belong in the project's scripts, not in a workflow.
const OWN_BUILD_RE = /(?:^|[\s;&|(])(apt-get|apt|cmake|ctest|npm|pip3?)\s/m;
// Expressions an outsider controls (branch names, issue text, dispatch inputs): env, not the script.
const INJECTION_RE = /\$\{\{\s*(inputs\.|github\.event\.|github\.head_ref)/;

const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

export function configurePresets(text) {
  return JSON.parse(text)
    .configurePresets.filter((p) => !p.hidden)
    .map((p) => p.name);
}

function checkOn(on, at, errors) {
  let events = [];
  if (typeof on === 'string') events = [on];
  else if (Array.isArray(on)) events = on;
  else if (isMap(on)) events = Object.keys(on);
  else errors.push(`${at}: 'on' must be an event, a list of events or a map of events`);
  for (const e of events) if (!EVENTS.has(e)) errors.push(`${at}: on: '${e}' is not a GitHub Actions event`);
  return events;
}

function checkRun(step, at, ctx, errors) {
  const run = step.run;
  if (typeof run !== 'string' || run.trim() === '') {
    errors.push(`${at}: run must be a non-empty script`);
    return;
  }
  if (INJECTION_RE.test(run)) errors.push(`${at}: pass \${{ inputs/github.event/head_ref }} through env, not into the script`);
  const own = OWN_BUILD_RE.exec(run);
  if (own) errors.push(`${at}: '${own[1]}' in a workflow: call the project's scripts as the README does`);
  for (const [, path] of run.matchAll(PATH_RE)) {
    if (ctx.exists(path)) continue;
    const future = FUTURE[path];
    if (!future) errors.push(`${at}: ${path} does not exist`);
    else if (future.guard && !String(step.if ?? '').includes(`hashFiles('${path}')`))
      errors.push(`${at}: ${path} is not written yet: guard the step with if: hashFiles('${path}') != ''`);
  }
}

function checkStep(step, at, ctx, errors) {
  if (!isMap(step)) {
    errors.push(`${at}: a step must be a map`);
    return;
  }
  for (const k of Object.keys(step)) if (!STEP_KEYS.has(k)) errors.push(`${at}: unknown step key '${k}'`);
  if (('uses' in step) === ('run' in step)) errors.push(`${at}: a step has either uses or run`);
  if ('uses' in step && !/^(\.\/|docker:\/\/|[\w.-]+\/[\w./-]+@[\w.-]+$)/.test(String(step.uses)))
    errors.push(`${at}: uses '${step.uses}' must name owner/action@ref (a pinned version)`);
  if ('run' in step) checkRun(step, at, ctx, errors);
}

// The values a job's matrix gives `preset` (a list or include entries).
function matrixPresets(job) {
  const m = job.strategy?.matrix;
  if (!isMap(m)) return [];
  const out = Array.isArray(m.preset) ? [...m.preset] : [];
  for (const inc of Array.isArray(m.include) ? m.include : []) if (isMap(inc) && 'preset' in inc) out.push(inc.preset);
  return out;
}

function checkJob(id, job, at, ctx, jobs, errors) {
  if (!/^[A-Za-z_][\w-]*$/.test(id)) errors.push(`${at}: job id '${id}' must start with a letter or _`);
  if (!isMap(job)) {
    errors.push(`${at}: a job must be a map`);
    return;
  }
  for (const k of Object.keys(job)) if (!JOB_KEYS.has(k)) errors.push(`${at}: unknown job key '${k}'`);
  for (const n of [job.needs ?? []].flat()) if (!(n in jobs)) errors.push(`${at}: needs unknown job '${n}'`);
  for (const p of matrixPresets(job))
    if (!ctx.presets.includes(p)) errors.push(`${at}: matrix preset '${p}' is not a configure preset in CMakePresets.json`);
  if ('uses' in job) return; // a reusable workflow: no runs-on or steps of its own
  const runsOn = job['runs-on'];
  if (!(typeof runsOn === 'string' || (Array.isArray(runsOn) && runsOn.length) || isMap(runsOn)))
    errors.push(`${at}: runs-on is missing`);
  if (!Array.isArray(job.steps) || job.steps.length === 0) {
    errors.push(`${at}: steps must be a non-empty list`);
    return;
  }
  job.steps.forEach((s, i) => checkStep(s, `${at}: step ${i + 1}${s?.name ? ` (${s.name})` : ''}`, ctx, errors));
}

// One workflow file's text; ctx: { exists(path), presets: [names] }. Returns { doc, errors }.
export function checkWorkflow(file, text, ctx) {
  const errors = [];
  let doc;
  try {
    doc = YAML.parse(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    return { doc: null, errors: [`${file}: not YAML: ${e.message.split('\n')[0]}`] };
  }
  if (!isMap(doc)) return { doc: null, errors: [`${file}: not a YAML mapping`] };
  for (const k of Object.keys(doc)) if (!TOP_KEYS.has(k)) errors.push(`${file}: unknown top-level key '${k}'`);
  if (typeof doc.name !== 'string' || doc.name.trim() === '') errors.push(`${file}: name is missing`);
  if (!('on' in doc)) errors.push(`${file}: 'on' (the triggering events) is missing`);
  else checkOn(doc.on, file, errors);
  if (!isMap(doc.jobs) || Object.keys(doc.jobs).length === 0) {
    errors.push(`${file}: jobs must be a non-empty map`);
    return { doc, errors };
  }
  for (const [id, job] of Object.entries(doc.jobs)) checkJob(id, job, `${file}: job ${id}`, ctx, doc.jobs, errors);
  return { doc, errors };
}

const allRuns = (doc) =>
  Object.values(doc?.jobs ?? {}).flatMap((j) => (Array.isArray(j?.steps) ? j.steps.map((s) => String(s?.run ?? '')) : []));

// The project's own requirements on ci.yml and release.yml (docs: DEVELOPERS.md).
export function checkProject(docs, presets) {
  const errors = [];
  const ci = docs['ci.yml'];
  const release = docs['release.yml'];
  if (!ci) errors.push('ci.yml is missing');
  else {
    if (!allRuns(ci).some((r) => /(^|\s)(bash )?\.ci\/run\b/.test(r))) errors.push('ci.yml: no step runs .ci/run');
    const covered = new Set(Object.values(ci.jobs ?? {}).flatMap(matrixPresets));
    for (const p of presets) if (!covered.has(p)) errors.push(`ci.yml: preset '${p}' (CMakePresets.json) is in no matrix`);
  }
  if (!release) errors.push('release.yml is missing');
  else if (!allRuns(release).some((r) => /tests\/release\/versions\.mjs --tag/.test(r)))
    errors.push('release.yml: no step checks the tag with tests/release/versions.mjs --tag');
  return errors;
}

export function checkRepo(root) {
  const dir = join(root, '.github/workflows');
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  const presets = configurePresets(readFileSync(join(root, 'CMakePresets.json'), 'utf8'));
  const ctx = { exists: (p) => existsSync(join(root, p)), presets };
  const errors = [];
  const docs = {};
  for (const f of files) {
    const r = checkWorkflow(f, readFileSync(join(dir, f), 'utf8'), ctx);
    errors.push(...r.errors);
    docs[f] = r.doc;
  }
  errors.push(...checkProject(docs, presets));
  return { files, errors };
}

function main(argv) {
  let root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  if (argv.length === 2 && argv[0] === '--root') root = argv[1];
  else if (argv.length !== 0) {
    console.error(`usage: ${PROG} [--root DIR]`);
    process.exit(2);
  }
  const { files, errors } = checkRepo(root);
  for (const e of errors) console.error(`${PROG}: ${e}`);
  if (errors.length > 0) process.exit(1);
  console.log(`${PROG}: ${files.length} workflows (${files.join(', ')}) pass`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
