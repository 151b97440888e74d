// Validates Kubernetes manifests offline against the API's schemas, as the API server would
// refuse them: node validate.mjs FILE.yaml ... (scripts/check-deploy.sh runs it).
//
// Each document of each file is checked by
//  - kubernetes-models: JSON schemas of the Kubernetes OpenAPI (types, required fields, enums,
//    formats), compiled with ajv;
//  - @kubernetes/client-node (the official client): its generated models know every field of
//    every type, so a field that does not survive a round trip through them is unknown (a typo
//    such as `readinesProbe`, which the schemas alone accept and the API server drops or
//    refuses);
//  - a few rules of the API server itself: names are DNS labels/subdomains, a workload's
//    selector matches its pod template's labels, named target ports exist.
// Prints one line per problem (file, document, path) and exits 1 if there is any.
import fs from 'node:fs';
import {createRequire} from 'node:module';
import {parseAllDocuments} from 'yaml';
import {ObjectSerializer} from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';

const require = createRequire(import.meta.url);
const MODELS_DIR = require.resolve('kubernetes-models/package.json').replace(/package\.json$/, '');

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN =
    /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
// Kinds whose names must be DNS labels (the rest: DNS subdomains).
const LABEL_NAMED = new Set(['Namespace', 'Service']);
const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job']);

// The kubernetes-models class of a document: apps/v1 + StatefulSet -> apps/v1/StatefulSet.
async function modelOf(apiVersion, kind) {
  const file = `${MODELS_DIR}${apiVersion}/${kind}.js`;
  if (!/^[A-Za-z0-9.]+(\/[A-Za-z0-9]+)?$/.test(apiVersion) || !/^[A-Za-z0-9]+$/.test(kind) ||
      !fs.existsSync(file)) {
    return null;
  }
  return (await import(file))[kind];
}

// The client-node model name: V1StatefulSet, V2HorizontalPodAutoscaler, ...
function clientTypeOf(apiVersion, kind) {
  const version = apiVersion.split('/').pop();
  const type = version.charAt(0).toUpperCase() + version.slice(1) + kind;
  return ObjectSerializer.findCorrectType({}, type) === type ? type : null;
}

// Paths of `original` that are missing from `kept` (the fields the models do not know).
function dropped(original, kept, path, out) {
  if (Array.isArray(original)) {
    original.forEach((v, i) => dropped(v, Array.isArray(kept) ? kept[i] : undefined,
        `${path}[${i}]`, out));
  } else if (original !== null && typeof original === 'object') {
    for (const [k, v] of Object.entries(original)) {
      const here = `${path}.${k}`;
      if (kept === null || typeof kept !== 'object' || !(k in kept)) out.push(here);
      else dropped(v, kept[k], here, out);
    }
  }
  return out;
}

// A JSON pointer (/spec/containers/0/name) as the paths above write it (spec.containers[0].name).
function pathOf(pointer) {
  const parts = pointer.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  return parts.map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : (i ? '.' : '') + p)).join('') ||
      '(root)';
}

function ruleProblems(doc) {
  const problems = [];
  const name = doc.metadata && doc.metadata.name;
  if (typeof name !== 'string' || !name) {
    problems.push('metadata.name: missing');
  } else if (!(LABEL_NAMED.has(doc.kind) ? DNS_LABEL : DNS_SUBDOMAIN).test(name)) {
    problems.push(`metadata.name: "${name}" is not a DNS ${
      LABEL_NAMED.has(doc.kind) ? 'label' : 'subdomain'}`);
  }
  const spec = doc.spec || {};
  if (WORKLOADS.has(doc.kind) && spec.selector && spec.selector.matchLabels) {
    const labels = (spec.template && spec.template.metadata && spec.template.metadata.labels) ||
        {};
    for (const [k, v] of Object.entries(spec.selector.matchLabels)) {
      if (labels[k] !== v) {
        problems.push(`spec.selector.matchLabels.${k}: "${v}" does not match the pod ` +
            `template's labels (the API server refuses it)`);
      }
    }
  }
  return problems;
}

// Named targetPorts of Services must be container ports of the pods they select, among the
// workloads of the same files.
function portProblems(entries) {
  const problems = [];
  const workloads = entries.filter((e) => WORKLOADS.has(e.doc.kind));
  for (const e of entries) {
    if (e.doc.kind !== 'Service' || !e.doc.spec || !e.doc.spec.selector) continue;
    const selector = e.doc.spec.selector;
    const pods = workloads.filter((w) => {
      const labels = (((w.doc.spec || {}).template || {}).metadata || {}).labels || {};
      return (w.doc.metadata || {}).namespace === (e.doc.metadata || {}).namespace &&
          Object.entries(selector).every(([k, v]) => labels[k] === v);
    });
    if (!pods.length) continue;  // selects pods defined elsewhere
    const named = new Set();
    for (const w of pods) {
      for (const c of (((w.doc.spec || {}).template || {}).spec || {}).containers || []) {
        for (const p of c.ports || []) if (p.name) named.add(p.name);
      }
    }
    (e.doc.spec.ports || []).forEach((p, i) => {
      if (typeof p.targetPort === 'string' && !named.has(p.targetPort)) {
        problems.push(`${e.where}: spec.ports[${i}].targetPort: no container port named ` +
            `"${p.targetPort}" in the pods it selects`);
      }
    });
  }
  return problems;
}

async function main(files) {
  if (!files.length) {
    console.error('usage: node validate.mjs FILE.yaml ...');
    return 2;
  }
  const problems = [];
  const entries = [];
  let count = 0;
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8');
    const docs = parseAllDocuments(text, {prettyErrors: true, uniqueKeys: true});
    if (!docs.length) problems.push(`${file}: no document`);
    docs.forEach((d, i) => {
      const where = `${file}: document ${i + 1}`;
      for (const err of [...d.errors, ...d.warnings]) {
        problems.push(`${where}: YAML: ${err.message.split('\n')[0].replace(/:$/, '')}`);
      }
      if (d.errors.length) return;
      const doc = d.toJS();
      if (doc === null || doc === undefined) return;  // an empty document
      entries.push({where, doc});
    });
  }
  for (const {where, doc} of entries) {
    count++;
    if (typeof doc !== 'object' || Array.isArray(doc)) {
      problems.push(`${where}: not a mapping`);
      continue;
    }
    const {apiVersion, kind} = doc;
    const label = `${where} (${kind} ${(doc.metadata || {}).name})`;
    const Model = typeof apiVersion === 'string' && typeof kind === 'string' ?
      await modelOf(apiVersion, kind) : null;
    const clientType = Model ? clientTypeOf(apiVersion, kind) : null;
    if (!Model || !clientType) {
      problems.push(`${label}: unknown apiVersion/kind ${apiVersion}/${kind}`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      for (const err of e.errors || [{instancePath: '', message: e.message}]) {
        const extra = err.params && err.params.allowedValues ?
          ` (${err.params.allowedValues.join(', ')})` : '';
        problems.push(`${label}: ${pathOf(err.instancePath)}: ${err.message}${extra}`);
      }
    }
    const kept = ObjectSerializer.serialize(ObjectSerializer.deserialize(doc, clientType),
        clientType);
    for (const path of dropped(doc, kept, '', [])) {
      problems.push(`${label}: ${path.slice(1)}: unknown field`);
    }
    for (const p of ruleProblems(doc)) problems.push(`${label}: ${p}`);
  }
  problems.push(...portProblems(entries));
  for (const p of problems) console.log(p);
  console.log(`${count} manifests in ${files.length} files: ` +
      `${problems.length ? `${problems.length} problems` : 'valid'}`);
  return problems.length ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
