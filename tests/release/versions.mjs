// Krafla has one version number: project(krafla VERSION X.Y.Z) in CMakeLists.txt (every
// executable's --version, ml_server's system_fingerprint "krafla-X.Y.Z-ISA"). This checks that
// CHANGELOG.md and CITATION.cff agree with it. The rule (DEVELOPERS.md, "Cutting a release"):
//
// - CHANGELOG.md follows Keep a Changelog: its first `## ` section is `## [Unreleased]` (what
//   main has that no release has), every other one is a release `## [X.Y.Z] - YYYY-MM-DD`,
//   newest first, and `### ` headings are its kinds (Added, Changed, Deprecated, Removed, Fixed,
//   Security), optionally followed by words.
// - The CMake version V is either released (the newest release section is [V]) or being prepared
//   (newer than every release section). A release section newer than V means CMake was not bumped.
// - CITATION.cff is valid CFF 1.2 with `version: V`; once V is released, its `date-released` is
//   the date of V's section.
// - With --tag vX.Y.Z (release.yml, on the pushed tag) V must be released: the tag is vV, the
//   section [V] has a date that is not in the future and CITATION.cff's date-released is that
//   date. So a release is cut by one commit that bumps all three files, and a tag on any other
//   commit fails before anything is built or published.
//
//   node tests/release/versions.mjs [--root DIR] [--tag vX.Y.Z] [--cmake-version X.Y.Z]
//   node tests/release/versions.mjs --notes X.Y.Z      # print that release's CHANGELOG section
//
// Exit 0 when all agree, 1 with one line per disagreement, 2 on bad arguments, 77 (skipped) when
// the npm packages are not installed (scripts/setup.sh --tests).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const PROG = 'versions.mjs';
let YAML;
let SPDX;
try {
  YAML = await import('yaml');
  SPDX = new Set(createRequire(import.meta.url)('spdx-license-ids'));
} catch {
  console.error(`${PROG}: skipped: npm packages missing (npm ci in tests/release: scripts/setup.sh --tests)`);
  process.exit(77);
}

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;
const KINDS = ['Added', 'Changed', 'Deprecated', 'Removed', 'Fixed', 'Security'];

// -1, 0, 1 as a < b, a == b, a > b for X.Y.Z strings.
export function compareVersions(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] < pb[i] ? -1 : 1;
  return 0;
}

// A real calendar date written YYYY-MM-DD.
export function isDate(s) {
  if (typeof s !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

export function cmakeVersion(text) {
  const m = /^\s*project\s*\(\s*krafla\s+VERSION\s+([^\s)]+)/im.exec(text);
  if (!m) throw new Error('CMakeLists.txt: no project(krafla VERSION X.Y.Z ...)');
  if (!SEMVER.test(m[1])) throw new Error(`CMakeLists.txt: version '${m[1]}' is not X.Y.Z`);
  return m[1];
}

// The `## ` sections of CHANGELOG.md: { unreleased, releases: [{version, date, line}], errors }.
export function parseChangelog(text) {
  const errors = [];
  const releases = [];
  let unreleased = false;
  let sections = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    const at = `CHANGELOG.md:${i + 1}`;
    if (line.startsWith('### ')) {
      const kind = line.slice(4).split(/[\s(:]/)[0];
      if (!KINDS.includes(kind)) errors.push(`${at}: '${line}' is not one of ### ${KINDS.join(', ')}`);
      return;
    }
    if (!line.startsWith('## ')) return;
    sections++;
    if (line === '## [Unreleased]') {
      if (sections !== 1) errors.push(`${at}: ## [Unreleased] must be the first section`);
      unreleased = true;
      return;
    }
    const m = /^## \[([^\]]+)\] - (\S+)$/.exec(line);
    if (!m) {
      errors.push(`${at}: '${line}' is neither ## [Unreleased] nor ## [X.Y.Z] - YYYY-MM-DD`);
    } else if (!SEMVER.test(m[1])) {
      errors.push(`${at}: version '${m[1]}' is not X.Y.Z`);
    } else if (!isDate(m[2])) {
      errors.push(`${at}: release ${m[1]} has '${m[2]}' for a date: YYYY-MM-DD (an unreleased version stays under ## [Unreleased])`);
    } else {
      releases.push({ version: m[1], date: m[2], line: i + 1 });
    }
  });
  if (!unreleased) errors.push('CHANGELOG.md: no ## [Unreleased] section (keep it, even empty, above the releases)');
  for (let i = 1; i < releases.length; i++) {
    const [newer, older] = [releases[i - 1], releases[i]];
    if (compareVersions(newer.version, older.version) <= 0)
      errors.push(`CHANGELOG.md:${older.line}: ${older.version} after ${newer.version}: releases go newest first, once each`);
    else if (newer.date < older.date)
      errors.push(`CHANGELOG.md:${older.line}: ${older.version} (${older.date}) is dated after the newer ${newer.version} (${newer.date})`);
  }
  return { unreleased, releases, errors };
}

// The CITATION.cff keys of CFF 1.2 (schema.json of citation-file-format 1.2.0: no others allowed).
const CFF_KEYS = new Set([
  'abstract', 'authors', 'cff-version', 'commit', 'contact', 'date-released', 'doi', 'identifiers',
  'keywords', 'license', 'license-url', 'message', 'preferred-citation', 'references', 'repository',
  'repository-artifact', 'repository-code', 'title', 'type', 'url', 'version',
]);

const nonEmptyString = (v) => typeof v === 'string' && v.trim() !== '';
const isUrl = (v) => typeof v === 'string' && /^(https|http|ftp|sftp):\/\/\S+$/.test(v);

function checkAuthors(authors, errors) {
  if (!Array.isArray(authors) || authors.length === 0) {
    errors.push('CITATION.cff: authors must be a non-empty list');
    return;
  }
  authors.forEach((a, i) => {
    if (a === null || typeof a !== 'object' || Array.isArray(a))
      errors.push(`CITATION.cff: authors[${i}] must be an object (a person or an entity)`);
    else if (!nonEmptyString(a.name) && !nonEmptyString(a['family-names']))
      errors.push(`CITATION.cff: authors[${i}] needs name (an entity) or family-names (a person)`);
  });
}

function checkLicense(license, errors) {
  const ids = Array.isArray(license) ? license : [license];
  if (ids.length === 0 || ids.some((id) => typeof id !== 'string' || !SPDX.has(id)))
    errors.push(`CITATION.cff: license ${JSON.stringify(license)} is not an SPDX license id (or a list of them)`);
}

// CITATION.cff's structure against CFF 1.2; returns { doc, errors }.
export function checkCitation(text) {
  const errors = [];
  let doc;
  try {
    doc = YAML.parse(text, { prettyErrors: true });
  } catch (e) {
    return { doc: null, errors: [`CITATION.cff: not YAML: ${e.message.split('\n')[0]}`] };
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    return { doc: null, errors: ['CITATION.cff: not a YAML mapping'] };
  for (const k of Object.keys(doc)) if (!CFF_KEYS.has(k)) errors.push(`CITATION.cff: '${k}' is not a CFF 1.2 key`);
  if (doc['cff-version'] !== '1.2.0') errors.push(`CITATION.cff: cff-version must be "1.2.0", not ${JSON.stringify(doc['cff-version'])}`);
  for (const k of ['message', 'title'])
    if (!nonEmptyString(doc[k])) errors.push(`CITATION.cff: ${k} must be a non-empty string`);
  checkAuthors(doc.authors, errors);
  if (!SEMVER.test(String(doc.version ?? ''))) errors.push(`CITATION.cff: version must be X.Y.Z, not ${JSON.stringify(doc.version)}`);
  if (!isDate(doc['date-released']))
    errors.push(`CITATION.cff: date-released must be a date YYYY-MM-DD, not ${JSON.stringify(doc['date-released'])}`);
  checkLicense(doc.license, errors);
  if (!isUrl(doc['repository-code'])) errors.push('CITATION.cff: repository-code must be a URL');
  for (const k of ['url', 'repository', 'repository-artifact', 'license-url'])
    if (k in doc && !isUrl(doc[k])) errors.push(`CITATION.cff: ${k} must be a URL`);
  if ('keywords' in doc && !(Array.isArray(doc.keywords) && doc.keywords.every(nonEmptyString)))
    errors.push('CITATION.cff: keywords must be a list of strings');
  if ('abstract' in doc && !nonEmptyString(doc.abstract)) errors.push('CITATION.cff: abstract must be a non-empty string');
  return { doc, errors };
}

// Every disagreement between the three files (texts), and with the tag when one is given.
// today: YYYY-MM-DD (UTC), for the tag's release date.
export function checkVersions({ cmake, changelog, citation }, { tag = null, today = null } = {}) {
  let v;
  try {
    v = cmakeVersion(cmake);
  } catch (e) {
    return [e.message];
  }
  const log = parseChangelog(changelog);
  const cff = checkCitation(citation);
  const errors = [...log.errors, ...cff.errors];
  const newest = log.releases[0];
  const own = log.releases.find((r) => r.version === v);
  if (newest && compareVersions(newest.version, v) > 0)
    errors.push(`CHANGELOG.md:${newest.line}: release ${newest.version} is newer than CMake's ${v}: bump project(krafla VERSION) in CMakeLists.txt`);
  if (cff.doc && String(cff.doc.version) !== v)
    errors.push(`CITATION.cff: version ${cff.doc.version} but CMakeLists.txt says ${v}`);
  if (own && cff.doc && cff.doc['date-released'] !== own.date)
    errors.push(`CITATION.cff: date-released ${cff.doc['date-released']} but CHANGELOG.md dates ${v} ${own.date}`);
  if (tag !== null) {
    if (tag !== `v${v}`) errors.push(`tag ${tag} but CMakeLists.txt says ${v}: the tag must be v${v}`);
    if (!own) errors.push(`tag ${tag}: CHANGELOG.md has no release section ## [${v}] - YYYY-MM-DD (its changes are still under [Unreleased])`);
    else if (today && own.date > nextDay(today)) errors.push(`tag ${tag}: CHANGELOG.md dates ${v} ${own.date}, in the future`);
  }
  return errors;
}

// One day of slack for a release dated in a time zone ahead of UTC.
function nextDay(day) {
  return new Date(Date.parse(`${day}T00:00:00Z`) + 86400000).toISOString().slice(0, 10);
}

// The body of `## [version] - date` in CHANGELOG.md, for the GitHub release notes.
export function releaseNotes(changelog, version) {
  const lines = changelog.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`## [${version}] - `));
  if (start < 0) return null;
  let end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  if (end < 0) end = lines.length;
  return lines.slice(start + 1, end).join('\n').trim() + '\n';
}

export function readRepo(root) {
  const read = (f) => readFileSync(join(root, f), 'utf8');
  return { cmake: read('CMakeLists.txt'), changelog: read('CHANGELOG.md'), citation: read('CITATION.cff') };
}

function parseArgs(argv) {
  const a = { root: resolve(dirname(fileURLToPath(import.meta.url)), '../..'), tag: null, cmakeVersion: null, notes: null };
  const keys = { '--root': 'root', '--tag': 'tag', '--cmake-version': 'cmakeVersion', '--notes': 'notes' };
  for (let i = 0; i < argv.length; i += 2) {
    if (!(argv[i] in keys) || argv[i + 1] === undefined) {
      console.error(`usage: ${PROG} [--root DIR] [--tag vX.Y.Z] [--cmake-version X.Y.Z] | --notes X.Y.Z`);
      process.exit(2);
    }
    a[keys[argv[i]]] = argv[i + 1];
  }
  return a;
}

function main(argv) {
  const a = parseArgs(argv);
  const files = readRepo(a.root);
  if (a.notes !== null) {
    const notes = releaseNotes(files.changelog, a.notes);
    if (notes === null) {
      console.error(`${PROG}: error: CHANGELOG.md has no section ## [${a.notes}] - YYYY-MM-DD`);
      process.exit(1);
    }
    process.stdout.write(notes);
    return;
  }
  const errors = checkVersions(files, { tag: a.tag, today: new Date().toISOString().slice(0, 10) });
  // CMake's own PROJECT_VERSION (ctest passes it) proves the regex reads what CMake reads.
  let v = null;
  try {
    v = cmakeVersion(files.cmake);
  } catch {
    // already among the errors
  }
  if (a.cmakeVersion !== null && v !== null && v !== a.cmakeVersion)
    errors.push(`CMakeLists.txt read as ${v} but CMake's PROJECT_VERSION is ${a.cmakeVersion}`);
  for (const e of errors) console.error(`${PROG}: ${e}`);
  if (errors.length > 0) process.exit(1);
  const state = parseChangelog(files.changelog).releases.some((r) => r.version === v) ? 'released' : 'not released yet';
  console.log(`${PROG}: version ${v} (${state}${a.tag ? `, tag ${a.tag}` : ''}): CMakeLists.txt, CHANGELOG.md and CITATION.cff agree`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
