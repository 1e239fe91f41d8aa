/*
 * The deploytool harness page: load one model in one in-browser runtime
 * (TF.js on wasm/cpu/webgl, onnxruntime-web on wasm, TFLite on tfjs-tflite),
 * fetch the preprocessed test inputs as raw bytes, warm up, time every sample
 * at batch 1, run the whole set for outputs (a model that runs at batch 1
 * only takes the timed samples' outputs from the timed pass), and POST outputs and latencies
 * back as raw bytes. Python (deploytool/runtimes/web.py) drives it with
 * small JSON only: tensors never travel through page.evaluate.
 *
 * It must not compare, round or post-process outputs: dequantization and
 * comparison happen in Python, the same way for every target.
 *
 * Protocol: harness.start(kind, config) starts a job ("load" or "run") and
 * returns at once; harness.job is {done, ok, result | error}. Python waits for
 * done with its own timeout, so a hung page cannot hang the caller.
 */
'use strict';

(function () {
  const LIB = {
    tf: '/lib/tfjs/tf.min.js',
    tfWasm: '/lib/tfjs-backend-wasm/tf-backend-wasm.min.js',
    tflite: '/lib/tfjs-tflite/tf-tflite.min.js',
    ort: '/lib/onnxruntime-web/ort.wasm.min.js',
  };
  const WASM_PATH = {
    tfWasm: '/lib/tfjs-backend-wasm/',
    ort: '/lib/onnxruntime-web/',
  };

  const now = () => performance.now();
  const status = (s) => {
    const el = document.getElementById('status');
    if (el) el.textContent = s;
  };

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = resolve;
      s.onerror = () => reject(new Error(`could not load ${src}`));
      document.head.appendChild(s);
    });
  }

  async function fetchBytes(url) {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`GET ${url}: HTTP ${r.status}`);
    return r.arrayBuffer();
  }

  async function postBytes(url, typedArray) {
    const r = await fetch(url, {
      method: 'POST',
      headers: {'Content-Type': 'application/octet-stream'},
      body: new Blob([typedArray]),
    });
    if (!r.ok) throw new Error(`POST ${url}: HTTP ${r.status}`);
  }

  function webglRenderer() {
    try {
      const gl = document.createElement('canvas').getContext('webgl2') ||
          document.createElement('canvas').getContext('webgl');
      if (!gl) return null;
      const ext = gl.getExtension('WEBGL_debug_renderer_info');
      return String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
    } catch (e) {
      return null;
    }
  }

  const memory = {jsHeapUsedPeak: 0, tensorBytesPeak: 0, wasmBytes: null};
  function sampleMemory() {
    // performance.memory (precise with --enable-precise-memory-info) counts JS
    // objects and ArrayBuffers but, as measured in Chromium 156, not
    // WebAssembly.Memory: the wasm heap is read from the runtime itself (it
    // only grows, so its size is its peak). tf.memory() counts tensors only.
    if (performance.memory) {
      memory.jsHeapUsedPeak = Math.max(memory.jsHeapUsedPeak, performance.memory.usedJSHeapSize);
    }
    if (window.tf && runner && runner.usesTfjs) {
      memory.tensorBytesPeak = Math.max(memory.tensorBytesPeak, tf.memory().numBytes);
    }
    if (runner) {
      const w = runner.wasmMemoryBytes();
      if (w != null) memory.wasmBytes = Math.max(memory.wasmBytes || 0, w);
    }
  }

  // ---- runtimes: RUNTIMES[format](cfg) loads the library and the model and
  // returns {facts, sync, usesTfjs, wasmMemoryBytes(), infer(view, batch)};
  // infer returns the output as a typed array. `sync` runtimes return it
  // directly, so the timed loop never pays for a promise it does not need.

  function checkSingleOutput(y) {
    if (y instanceof tf.Tensor) return y;
    throw new Error('the model has several outputs; deploytool compares one output vector per sample');
  }

  const RUNTIMES = {
    async tfjs_graph(cfg) {
      const t0 = now();
      await loadScript(LIB.tf);
      const backend = cfg.backend;
      if (backend === 'wasm') {
        await loadScript(LIB.tfWasm);
        tf.wasm.setWasmPaths(WASM_PATH.tfWasm);
        tf.wasm.setThreadsCount(cfg.threads);
      }
      const libraryMs = now() - t0;
      const t1 = now();
      if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} failed to initialise`);
      await tf.ready();
      const backendInitMs = now() - t1;
      const t2 = now();
      const model = await tf.loadGraphModel(cfg.modelUrl);
      const modelLoadMs = now() - t2;
      const inShape = model.inputs[0].shape || [];
      const shape = cfg.sampleShape;
      const facts = {
        library: '@tensorflow/tfjs', library_version: tf.version.tfjs, backend: tf.getBackend(),
        batch_dynamic: !(inShape.length && inShape[0] > 0),
        library_load_ms: libraryMs, backend_init_ms: backendInitMs, model_load_ms: modelLoadMs,
      };
      if (backend === 'wasm') {
        facts.threads = tf.wasm.getThreadsCount();
        facts.wasm_simd_used = await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT');
        // The threaded build ran; how many threads it used is `threads`.
        facts.wasm_threaded_build = await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT');
      } else {
        facts.threads = 1;  // cpu runs on the main thread; webgl on the GPU process
      }
      if (backend === 'webgl') facts.webgl_renderer = webglRenderer();
      return {
        facts, sync: true, usesTfjs: true,
        wasmMemoryBytes() {
          const b = tf.backend();
          return backend === 'wasm' && b.wasm ? b.wasm.HEAPU8.byteLength : null;
        },
        infer(view, batch) {
          const x = tf.tensor(view, [batch, ...shape], 'float32');
          let y;
          try {
            // A model with control flow throws here asking for executeAsync;
            // that message is the browser's own and becomes the run's result.
            y = checkSingleOutput(model.predict(x));
          } finally {
            x.dispose();
          }
          const out = y.dataSync();
          y.dispose();
          return out;
        },
      };
    },

    async onnx(cfg) {
      const t0 = now();
      await loadScript(LIB.ort);
      ort.env.wasm.wasmPaths = WASM_PATH.ort;
      ort.env.wasm.numThreads = cfg.threads;
      ort.env.wasm.proxy = false;
      const libraryMs = now() - t0;
      const t2 = now();
      const bytes = await fetchBytes(cfg.modelUrl);
      const session = await ort.InferenceSession.create(bytes, {
        executionProviders: ['wasm'], graphOptimizationLevel: 'all',
        // Weights kept in files beside the model ({path, data: url}).
        externalData: cfg.externalData || [],
      });
      const modelLoadMs = now() - t2;
      const inName = session.inputNames[0];
      const outName = session.outputNames[0];
      if (session.outputNames.length !== 1) {
        throw new Error('the model has several outputs; deploytool compares one output vector per sample');
      }
      const meta = (session.inputMetadata || [])[0];
      const dim0 = meta && meta.shape ? meta.shape[0] : undefined;
      const shape = cfg.sampleShape;
      return {
        facts: {
          library: 'onnxruntime-web', library_version: ort.env.versions ? ort.env.versions.web : '',
          backend: 'wasm', threads: ort.env.wasm.numThreads,
          batch_dynamic: !(typeof dim0 === 'number' && dim0 > 0),
          library_load_ms: libraryMs, backend_init_ms: 0, model_load_ms: modelLoadMs,
        },
        sync: false, usesTfjs: false,
        wasmMemoryBytes: () => null,  // onnxruntime-web does not expose its wasm instance
        async infer(view, batch) {
          const x = new ort.Tensor('float32', view, [batch, ...shape]);
          const r = await session.run({[inName]: x});
          const out = r[outName].data;
          return out;
        },
      };
    },

    async tflite(cfg) {
      const t0 = now();
      await loadScript(LIB.tf);  // tfjs-tflite's UMD build needs tfjs-core
      await loadScript(LIB.tflite);
      // No setWasmPath: tfjs-tflite looks beside its own script first even
      // when given one, so the server serves its wasm files there.
      const libraryMs = now() - t0;
      const t2 = now();
      const bytes = await fetchBytes(cfg.modelUrl);
      const model = await tflite.loadTFLiteModel(bytes, {numThreads: cfg.threads});
      const modelLoadMs = now() - t2;
      // The interpreter itself: TFLiteModel.predict would add a tf.Tensor copy
      // on each side of every inference, which is not the interpreter's time.
      const mr = model.modelRunner;
      const ins = mr.getInputs();
      const outs = mr.getOutputs();
      if (ins.length !== 1 || outs.length !== 1) {
        throw new Error(`the model has ${ins.length} inputs and ${outs.length} outputs; ` +
                        'deploytool runs single-input single-output models');
      }
      const inType = ins[0].dataType;
      if (inType !== cfg.inputDtype) {
        throw new Error(`the model's input is ${inType} but ${cfg.inputDtype} inputs were prepared`);
      }
      const features = await tflite.getWasmFeatures();
      return {
        facts: {
          library: '@tensorflow/tfjs-tflite', library_version: '',  // filled in from package.json by Python
          backend: 'tflite-wasm', threads: cfg.threads,
          wasm_simd_used: features.simd, wasm_threaded_build: features.multiThreading,
          batch_dynamic: false, input_type: inType, output_type: outs[0].dataType,
          library_load_ms: libraryMs, backend_init_ms: 0, model_load_ms: modelLoadMs,
        },
        sync: true, usesTfjs: false,
        wasmMemoryBytes() {
          return mr.module && mr.module.HEAPU8 ? mr.module.HEAPU8.byteLength : null;
        },
        infer(view, batch) {
          if (batch !== 1) throw new Error('TFLite models run at batch 1 here');
          // getInputs()/getOutputs() each time: the tensor infos they return
          // are only valid until the next call (their C++ vector is freed).
          mr.getInputs()[0].data().set(view);
          if (!mr.infer()) throw new Error('TFLite inference failed');
          return mr.getOutputs()[0].data().slice();
        },
      };
    },
  };

  let runner = null;

  async function load(cfg) {
    status('loading');
    const make = RUNTIMES[cfg.format];
    if (!make) throw new Error(`the harness cannot run ${cfg.format} models`);
    const t0 = now();
    runner = await make(cfg);
    runner.shape = cfg.sampleShape;
    runner.sampleSize = cfg.sampleShape.reduce((a, b) => a * b, 1);
    sampleMemory();
    status('loaded');
    return Object.assign({load_ms: now() - t0}, runner.facts);
  }

  async function run(cfg) {
    if (!runner) throw new Error('no model is loaded');
    status('running');
    const per = runner.sampleSize;
    const t0 = now();
    const buf = await fetchBytes(cfg.inputsUrl);
    const fetchMs = now() - t0;
    const X = cfg.inputDtype === 'int8' ? new Int8Array(buf)
        : cfg.inputDtype === 'uint8' ? new Uint8Array(buf) : new Float32Array(buf);
    const n = cfg.n;
    if (X.length !== n * per) throw new Error(`inputs hold ${X.length} values, expected ${n} x ${per}`);
    const sample = (i, b) => X.subarray(i * per, (i + b) * per);
    const call = runner.sync ? (v, b) => runner.infer(v, b) : null;
    const inferStart = now();

    // First inference apart: it pays lazy initialisation (kernel compile,
    // shader build, memory planning) that steady state does not.
    let t = now();
    const first = runner.sync ? call(sample(0, 1), 1) : await runner.infer(sample(0, 1), 1);
    const firstMs = now() - t;
    const numOutputs = first.length;

    for (let i = 0; i < cfg.warmupRuns; i++) {
      const j = i % n;
      if (runner.sync) call(sample(j, 1), 1); else await runner.infer(sample(j, 1), 1);
    }

    const m = Math.min(cfg.latencySamples == null ? n : cfg.latencySamples, n);
    const lat = new Float64Array(m);
    const bs = runner.facts.batch_dynamic ? Math.max(1, cfg.batchSize) : 1;
    const outputs = new Float32Array(n * numOutputs);
    // A model that runs at batch 1 only: the timed batch-1 pass gives those samples' outputs too (kept
    // after each timer reading), and the whole-set pass runs only the samples it did not time.
    const keep = bs === 1;
    const check = (o, b) => {
      if (o.length !== b * numOutputs) {
        throw new Error(`batch of ${b} gave ${o.length} outputs, expected ${b * numOutputs}`);
      }
      return o;
    };
    t = now();
    if (runner.sync) {
      for (let i = 0; i < m; i++) {
        const v = sample(i, 1);
        const s = now();
        const o = call(v, 1);
        lat[i] = now() - s;
        if (keep) outputs.set(check(o, 1), i * numOutputs);
      }
    } else {
      for (let i = 0; i < m; i++) {
        const v = sample(i, 1);
        const s = now();
        const o = await runner.infer(v, 1);
        lat[i] = now() - s;
        if (keep) outputs.set(check(o, 1), i * numOutputs);
      }
    }
    const timedPassMs = now() - t;
    sampleMemory();

    const from = keep ? m : 0;
    t = now();
    for (let i = from; i < n; i += bs) {
      const b = Math.min(bs, n - i);
      const o = runner.sync ? call(sample(i, b), b) : await runner.infer(sample(i, b), b);
      outputs.set(check(o, b), i * numOutputs);  // int8 outputs become their float values here
    }
    // the whole set's time: at batch 1 the timed pass is part of it
    const wholeSetMs = now() - t + (keep ? timedPassMs : 0);
    const inferenceMs = now() - inferStart;
    sampleMemory();

    status('posting');
    t = now();
    await postBytes('/results/outputs', outputs);
    await postBytes('/results/latency', lat);
    const postMs = now() - t;
    status('done');
    return {
      n, num_outputs: numOutputs, latency_samples: m, batch_size: bs, outputs_from_timed_pass: keep ? m : 0,
      first_inference_ms: firstMs, whole_set_ms: wholeSetMs, inference_ms: inferenceMs,
      inputs_fetch_ms: fetchMs, results_post_ms: postMs, page_run_ms: now() - t0,
      js_heap_used_bytes: memory.jsHeapUsedPeak || null,
      tfjs_tensor_bytes: runner.usesTfjs ? memory.tensorBytesPeak : null,
      wasm_memory_bytes: memory.wasmBytes,
    };
  }

  const harness = {
    job: null,
    start(kind, cfg) {
      const fn = {load, run}[kind];
      const job = {done: false, ok: false, result: null, error: null};
      harness.job = job;
      if (!fn) {
        Object.assign(job, {done: true, error: `unknown job ${kind}`});
        return false;
      }
      fn(cfg).then(
          (r) => Object.assign(job, {done: true, ok: true, result: r}),
          (e) => Object.assign(job, {done: true, error: String((e && e.message) || e)}));
      return true;
    },
  };

  // An error nobody caught (a worker, a library callback) fails the running
  // job at once instead of leaving Python to wait for the timeout.
  function fail(msg) {
    const job = harness.job;
    if (job && !job.done) Object.assign(job, {done: true, ok: false, error: msg});
  }
  window.addEventListener('error', (e) => fail(`uncaught error: ${e.message}`));
  window.addEventListener('unhandledrejection', (e) => {
    const r = e.reason;
    fail(`unhandled rejection: ${(r && r.message) || r}`);
  });

  window.harness = harness;
})();
