// The release checks fail where they should: versions.mjs and workflows.mjs on altered copies of
// this repository's files (node:test; ctest release.selftest runs `node release.test.mjs`).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { checkVersions, releaseNotes, readRepo } from './versions.mjs';
import { checkProject, checkRepo, checkWorkflow, configurePresets } from './workflows.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const repo = readRepo(ROOT);

const CMAKE = 'cmake_minimum_required(VERSION 3.25)\nproject(krafla VERSION 0.2.0 LANGUAGES CXX)\n';
const CHANGELOG = `# Changelog

## [Unreleased]

### Added
- something new

## [0.2.0] - 2026-12-03

### Fixed (issue 9)
- a fix

## [0.1.0] - 2026-11-01

### Added
- the first release
`;
const citation = (version, date) =>
  repo.citation.replace(/^version: .*$/m, `version: ${version}`).replace(/^date-released: .*$/m, `date-released: ${date}`);
const released = { cmake: CMAKE, changelog: CHANGELOG, citation: citation('0.2.0', '2026-12-03') };
const TODAY = '2026-12-04';

// Asserts that exactly the errors matching `re` appear (at least one).
function fails(errors, re) {
  assert.ok(errors.length > 0, 'expected an error');
  for (const e of errors) assert.match(e, re);
}

test('this repository agrees with itself', () => {
  assert.deepEqual(checkVersions(repo), []);
  assert.deepEqual(checkRepo(ROOT).errors, []);
});

test('a released version passes, with and without its tag', () => {
  assert.deepEqual(checkVersions(released), []);
  assert.deepEqual(checkVersions(released, { tag: 'v0.2.0', today: TODAY }), []);
  assert.equal(releaseNotes(CHANGELOG, '0.2.0'), '### Fixed (issue 9)\n- a fix\n');
  assert.equal(releaseNotes(CHANGELOG, '0.3.0'), null);
});

test('a version being prepared passes until it is tagged', () => {
  const next = { ...released, cmake: CMAKE.replace('0.2.0', '0.3.0'), citation: citation('0.3.0', '2026-12-03') };
  assert.deepEqual(checkVersions(next), []);
  fails(checkVersions(next, { tag: 'v0.3.0', today: TODAY }), /no release section ## \[0\.3\.0\]/);
});

test('CMake, CHANGELOG and CITATION versions must agree', () => {
  fails(checkVersions({ ...released, citation: citation('0.1.0', '2026-12-03') }), /CITATION\.cff: version 0\.1\.0 but CMakeLists\.txt says 0\.2\.0/);
  const old = { ...released, cmake: CMAKE.replace('0.2.0', '0.1.0'), citation: citation('0.1.0', '2026-11-01') };
  fails(checkVersions(old), /release 0\.2\.0 is newer than CMake's 0\.1\.0/);
  fails(checkVersions({ ...released, citation: citation('0.2.0', '2026-12-02') }), /date-released 2026-12-02 but CHANGELOG\.md dates 0\.2\.0 2026-12-03/);
});

test('the tag must be the CMake version and not dated in the future', () => {
  fails(checkVersions(released, { tag: 'v0.2.1', today: TODAY }), /tag v0\.2\.1 but CMakeLists\.txt says 0\.2\.0/);
  fails(checkVersions(released, { tag: '0.2.0', today: TODAY }), /the tag must be v0\.2\.0/);
  fails(checkVersions(released, { tag: 'v0.2.0', today: '2026-12-01' }), /in the future/);
});

test('CHANGELOG.md keeps Keep a Changelog sections', () => {
  const edit = (from, to) => checkVersions({ ...released, changelog: CHANGELOG.replace(from, to) });
  fails(edit('## [Unreleased]\n', ''), /no ## \[Unreleased\] section/);
  fails(edit('## [0.2.0] - 2026-12-03', '## [0.2.0] - Unreleased'), /has 'Unreleased' for a date/);
  fails(edit('## [0.2.0] - 2026-12-03', '## [0.2.0] - 2026-02-30'), /has '2026-02-30' for a date/);
  fails(edit('## [0.2.0] - 2026-12-03', '## 0.2.0 - 2026-12-03'), /is neither/);
  fails(edit('## [0.1.0] - 2026-11-01', '## [0.2.0] - 2026-11-01'), /releases go newest first, once each/);
  fails(edit('## [0.1.0] - 2026-11-01', '## [0.1.0] - 2026-12-24'), /is dated after the newer 0\.2\.0/);
  fails(edit('### Fixed (issue 9)', '### Bugs'), /'### Bugs' is not one of/);
  const moved = CHANGELOG.replace('## [Unreleased]\n', '').replace('## [0.1.0]', '## [Unreleased]\n\n## [0.1.0]');
  fails(checkVersions({ ...released, changelog: moved }), /## \[Unreleased\] must be the first section/);
});

test('CITATION.cff is CFF 1.2', () => {
  const edit = (from, to) => checkVersions({ ...released, citation: released.citation.replace(from, to) });
  fails(edit('cff-version: 1.2.0', 'cff-version: 1.1.0'), /cff-version must be "1\.2\.0"/);
  fails(edit(/^authors:\n(  .*\n)+/m, 'authors: []\n'), /authors must be a non-empty list/);
  fails(edit(/^authors:\n(  .*\n)+/m, 'authors:\n  - given-names: Ada\n'), /needs name \(an entity\) or family-names/);
  fails(edit('license: Apache-2.0', 'license: Apache 2'), /not an SPDX license id/);
  fails(edit(/^repository-code: .*$/m, 'repository-code: krafla'), /repository-code must be a URL/);
  fails(edit(/^message: .*\n/m, ''), /message must be a non-empty string/);
  fails(edit('date-released: 2026-12-03', 'date-released: 3 Dec 2026'), /date-released must be a date|date-released 3 Dec 2026 but/);
  fails(edit('title:', 'titel:'), /'titel' is not a CFF 1\.2 key|title must be/);
  fails(edit('authors:', 'authors: ['), /not YAML/);
});

const presets = configurePresets(readFileSync(join(ROOT, 'CMakePresets.json'), 'utf8'));
const ctx = { exists: (p) => existsSync(join(ROOT, p)), presets };
const ci = readFileSync(join(ROOT, '.github/workflows/ci.yml'), 'utf8');
const wf = (text) => checkWorkflow('ci.yml', text, ctx).errors;

test('workflows keep GitHub Actions structure', () => {
  fails(wf(ci.replace('name: ci\n', '')), /name is missing/);
  fails(wf(ci.replace('on: [push, pull_request]', 'on: [push, pull-request]')), /'pull-request' is not a GitHub Actions event/);
  fails(wf(ci.replace('on: [push, pull_request]\n', '')), /'on' \(the triggering events\) is missing/);
  fails(wf(ci.replace(/^ {4}runs-on: ubuntu-24\.04\n(?= {4}strategy:\n {6}fail-fast: false\n {6}matrix:\n {8}preset: \[windows-)/m, '')), /job windows: runs-on is missing/);
  fails(wf(ci.replace('uses: actions/checkout@v4', 'uses: actions/checkout')), /must name owner\/action@ref/);
  fails(wf(ci.replace('    runs-on: ubuntu-24.04\n    steps:', '    runs-on: ubuntu-24.04\n    runs-on: ubuntu-22.04\n    steps:')), /not YAML/);
  fails(wf(ci + '  empty:\n    runs-on: ubuntu-24.04\n    steps: []\n'), /steps must be a non-empty list/);
  fails(wf(ci.replace('run: bash .ci/run', 'run: bash .ci/run\n        uses: actions/cache@v4')), /either uses or run/);
});

test('run scripts name only what exists, or a guarded future script', () => {
  fails(wf(ci.replace('run: scripts/test_all_isas.sh', 'run: scripts/test_every_isa.sh')), /scripts\/test_every_isa\.sh does not exist/);
  // a script another issue is still writing (FUTURE) must be guarded while it is absent
  const absent = { ...ctx, exists: (p) => p !== 'scripts/test_sanitizers.sh' && ctx.exists(p) };
  fails(checkWorkflow('ci.yml', ci, absent).errors, /guard the step with if: hashFiles\('scripts\/test_sanitizers\.sh'\)/);
  fails(wf(ci.replace('run: bash .ci/run', 'run: sudo apt-get install -y cmake')), /'apt-get' in a workflow/);
  fails(wf(ci.replace('run: bash .ci/run', 'run: echo "${{ github.event.head_commit.message }}"')), /through env/);
  fails(wf(ci.replace('{ preset: sve, args: --quick }', '{ preset: sve2, args: --quick }')), /matrix preset 'sve2' is not a configure preset/);
});

test('ci.yml covers every preset and runs .ci/run; release.yml checks the tag', () => {
  const YAML = (t) => checkWorkflow('x.yml', t, ctx).doc;
  const release = YAML(readFileSync(join(ROOT, '.github/workflows/release.yml'), 'utf8'));
  const noSve = YAML(ci.replace(/^ {10}- \{ preset: sve, args: --quick \}\n/m, ''));
  fails(checkProject({ 'ci.yml': noSve, 'release.yml': release }, presets), /preset 'sve' \(CMakePresets\.json\) is in no matrix/);
  fails(checkProject({ 'ci.yml': YAML(ci.replace('bash .ci/run', 'scripts/test.sh')), 'release.yml': release }, presets), /no step runs \.ci\/run/);
  fails(checkProject({ 'ci.yml': YAML(ci) }, presets), /release\.yml is missing/);
});
