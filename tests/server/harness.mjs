// Starts ml_server on a free loopback port (--port 0; the port is read from its log line) with
// the model the e2e.setup fixture generated, and stops it again.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

export const BIN = process.env.ML_SERVER;
export const MODEL = process.env.ML_MODEL;

export function checkEnv() {
  if (!BIN || !existsSync(BIN)) throw new Error(`set ML_SERVER to the ml_server binary (got ${BIN})`);
  if (!MODEL || !existsSync(MODEL))
    throw new Error(`set ML_MODEL to a .mlb model, e.g. BUILD/e2e/llama-q8_0.mlb (got ${MODEL})`);
}

// Runs ml_server with `args` (after -m MODEL --port 0) and resolves once it listens.
export function startServer(args = [], { env = {}, model = MODEL } = {}) {
  checkEnv();
  const proc = spawn(BIN, ['-m', model, '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ml_server did not start:\n${log}`)), 30000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = /serving model '([^']+)' on (http:\/\/[^\s]+)/.exec(log);
      if (m && timer) {
        clearTimeout(timer);
        resolve({
          proc,
          model: m[1],
          url: m[2],
          log: () => log,
          exited,
          async stop(signal = 'SIGTERM') {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
            return exited;
          },
        });
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`ml_server exited with ${code} before listening:\n${log}`));
    });
  });
}

// Runs ml_server to completion (for argument and model-file errors).
export function runServer(args, timeoutMs = 20000) {
  checkEnv();
  return new Promise((resolve) => {
    const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

// Polls `pred` until it holds or `ms` pass.
export async function waitFor(pred, ms = 5000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return pred();
}
