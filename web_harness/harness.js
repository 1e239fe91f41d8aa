/*
 * The deploytool harness page: load one model in one in-browser runtime
 * (TF.js on wasm/cpu/webgl/webgpu, onnxruntime-web on wasm or its WebGPU
 * execution provider, TFLite on tfjs-tflite),
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
    tfWebgpu: '/lib/tfjs-backend-webgpu/tf-backend-webgpu.min.js',
    tflite: '/lib/tfjs-tflite/tf-tflite.min.js',
    ort: '/lib/onnxruntime-web/ort.wasm.min.js',
    ortWebgpu: '/lib/onnxruntime-web/ort.webgpu.min.js',  // the WebGPU EP, with wasm for the ops it lacks
  };
  // Said when the page has no WebGPU adapter; Python turns it into the row's `unsupported` reason.
  const NO_ADAPTER = 'no WebGPU adapter: ';
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

  // TF.js's weight loader (loadWeightsAsArrayBuffer) waits for every shard's response before it reads any body.
  // A row's model is served no-store, so Chromium keeps each unread body on its connection: a model of more shards
  // than the 6 connections Chromium opens to one HTTP/1.1 host never gets its 7th (keras ResNet50's 25 shards hung
  // the page until the row's timeout). Each response is read whole as it arrives, and its connection freed.
  async function drainedFetch(url, init) {
    const r = await fetch(url, init);
    const body = await r.arrayBuffer();
    return new Response(body, {status: r.status, statusText: r.statusText, headers: r.headers});
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

  // The WebGPU adapter the browser offers (what a library asking for one gets): its identity, whether it is a
  // fallback (software) adapter, and whether it could run float16 shaders. Throws NO_ADAPTER... when there is none.
  async function webgpuAdapter() {
    if (!window.isSecureContext) throw new Error(NO_ADAPTER + 'the page is not a secure context');
    if (!navigator.gpu) throw new Error(NO_ADAPTER + 'navigator.gpu is missing (WebGPU is off in this browser)');
    let adapter = null;
    try {
      adapter = await navigator.gpu.requestAdapter();
    } catch (e) {
      throw new Error(NO_ADAPTER + `requestAdapter failed: ${(e && e.message) || e}`);
    }
    if (!adapter) throw new Error(NO_ADAPTER + 'navigator.gpu.requestAdapter() returned null');
    const info = adapter.info || {};
    return {
      vendor: info.vendor || '', architecture: info.architecture || '', device: info.device || '',
      description: info.description || '',
      is_fallback_adapter: info.isFallbackAdapter === true || adapter.isFallbackAdapter === true,
      shader_f16: adapter.features.has('shader-f16'),
      max_storage_buffer_binding_size: adapter.limits.maxStorageBufferBindingSize,
    };
  }

  // TF.js flags that decide how a GPU backend computes (precision, packing, what it hands to the CPU), read
  // from the live env after the backend is set. Only the backend's own flags: evaluating WebGL's from a WebGPU
  // page opens a WebGL context, which (Chromium 156, SwiftShader) breaks WebGPU buffer reads afterwards.
  function tfjsFlags(backend) {
    const prefix = {webgl: 'WEBGL_', webgpu: 'WEBGPU_'}[backend];
    if (!prefix) return null;
    const out = {};
    const names = Object.keys(tf.env().getFlags ? tf.env().getFlags() : {})
        .concat(Object.keys(tf.env().flagRegistry || {}));
    for (const k of new Set(names)) {
      if (!k.startsWith(prefix)) continue;
      try {
        const v = tf.env().get(k);
        out[k] = (typeof v === 'number' && !isFinite(v)) ? String(v) : v;
      } catch (e) {
        out[k] = `unreadable: ${(e && e.message) || e}`;
      }
    }
    return out;
  }

  // onnxruntime-web's wasm prints its log with console.error, bound once when its module starts: a wrapper put
  // in place before that keeps the lines of a verbose session (and lets everything else through).
  const ortLog = {on: false, lines: [], installed: false};
  function captureOrtLog() {
    if (ortLog.installed) return;
    ortLog.installed = true;
    for (const level of ['error', 'warn', 'log']) {
      const original = console[level].bind(console);
      console[level] = (...args) => {
        if (ortLog.on) {
          if (ortLog.lines.length < 20000) ortLog.lines.push(args.map(String).join(' '));
          return;  // the verbose session's flood stays in the page
        }
        original(...args);
      };
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
  // returns {facts, sync, usesTfjs, wasmMemoryBytes(), inputNames, outputNames,
  // infer(views, batch, inputs, outputs)}: `views` one typed array per input;
  // `inputs`/`outputs` the model's names (a single-array model's one input and
  // one output too); it returns one typed array per output. `sync` runtimes return it
  // directly, so the timed loop never pays for a promise it does not need.

  // numpy dtype -> each library's name for it, and the typed array that carries it
  const TFJS_DTYPE = {float32: 'float32', int32: 'int32', int64: 'int32', bool: 'bool', uint8: 'int32', int8: 'int32'};
  const ORT_DTYPE = {float32: 'float32', int64: 'int64', int32: 'int32', bool: 'bool', uint8: 'uint8', int8: 'int8'};
  const ARRAY = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array,
                 bool: Uint8Array, int16: Int16Array};

  // The words a run that stopped for its time limit begins its error with (deploytool.runtimes.web.OVER_TIME)
  const OVER_TIME = 'the run cannot finish within its time limit:';

  // A typed array of float32 values, copied only where it is not one already: an int8 or int64 output becomes its
  // values here; a float32 one is taken as it is (a fresh buffer each inference in TF.js and onnxruntime-web)
  function asFloat32(d) {
    return d instanceof Float32Array ? d : Float32Array.from(d, Number);
  }

  // TF.js tensors of a batch of named inputs at their own types (TF.js has no int64: ids and masks are int32 there)
  function tfjsFeed(views, batch, inputs) {
    const feed = {};
    inputs.forEach((inp, k) => {
      const data = inp.dtype === 'int64' ? Int32Array.from(views[k], Number) : views[k];
      feed[inp.model] = tf.tensor(data, [batch, ...inp.shape], TFJS_DTYPE[inp.dtype] || 'float32');
    });
    return feed;
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
      let adapter = null;
      if (backend === 'webgpu') {
        adapter = await webgpuAdapter();  // none: the row is unsupported here, not a failure of TF.js
        await loadScript(LIB.tfWebgpu);
      }
      const libraryMs = now() - t0;
      const t1 = now();
      if (!(await tf.setBackend(backend))) throw new Error(`TF.js backend ${backend} failed to initialise`);
      await tf.ready();
      const backendInitMs = now() - t1;
      const t2 = now();
      const model = await tf.loadGraphModel(cfg.modelUrl, {fetchFunc: drainedFetch});
      const modelLoadMs = now() - t2;
      const inShape = model.inputs[0].shape || [];
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
      if (backend === 'webgpu') {
        facts.webgpu_adapter = adapter;
        const info = tf.backend().adapterInfo;  // what TF.js itself got
        if (info) facts.webgpu_adapter_tfjs = {vendor: info.vendor || '', architecture: info.architecture || ''};
      }
      const flags = tfjsFlags(backend);
      if (flags) facts.backend_flags = flags;
      // TF.js's webgpu backend reads results back synchronously (dataSync) through a canvas: on SwiftShader in
      // Chromium 156 that gave all zeros. Its outputs are read with the asynchronous data() it recommends.
      let viaAsync = backend === 'webgpu';
      if (viaAsync) Object.assign(facts, {readback: 'data()', execution: 'async'});  // a model with control flow (an LSTM's while loop) runs with executeAsync
      const runner = {
        facts, sync: !viaAsync, usesTfjs: true,
        goAsync() {
          viaAsync = true;
          runner.sync = false;
          facts.execution = 'executeAsync';
        },
        wasmMemoryBytes() {
          const b = tf.backend();
          return backend === 'wasm' && b.wasm ? b.wasm.HEAPU8.byteLength : null;
        },
        inputNames: model.inputs.map((i) => i.name),
        outputNames: model.outputs.map((o) => o.name),
        infer(views, batch, inputs, outputs) {
          if (viaAsync) return runner.inferAsync(views, batch, inputs, outputs);
          const feed = tfjsFeed(views, batch, inputs);
          let ys;
          try {
            // A model with control flow throws here asking for executeAsync (run() then switches)
            ys = model.execute(feed, outputs);
          } finally {
            Object.values(feed).forEach((x) => x.dispose());
          }
          ys = Array.isArray(ys) ? ys : [ys];
          const outs = ys.map((y) => asFloat32(y.dataSync()));
          ys.forEach((y) => y.dispose());
          return outs;
        },
        async inferAsync(views, batch, inputs, outputs) {
          const feed = tfjsFeed(views, batch, inputs);
          let ys;
          try {
            ys = await model.executeAsync(feed, outputs);
          } finally {
            Object.values(feed).forEach((x) => x.dispose());
          }
          ys = Array.isArray(ys) ? ys : [ys];
          const outs = [];
          for (const y of ys) outs.push(asFloat32(await y.data()));
          ys.forEach((y) => y.dispose());
          return outs;
        },
      };
      return runner;
    },

    async onnx(cfg) {
      const t0 = now();
      const webgpu = cfg.backend === 'webgpu';
      const adapter = webgpu ? await webgpuAdapter() : null;
      if (webgpu) captureOrtLog();  // before the library binds console.error for its wasm log
      await loadScript(webgpu ? LIB.ortWebgpu : LIB.ort);
      ort.env.wasm.wasmPaths = WASM_PATH.ort;
      ort.env.wasm.numThreads = cfg.threads;
      ort.env.wasm.proxy = false;
      const libraryMs = now() - t0;
      const t2 = now();
      const bytes = await fetchBytes(cfg.modelUrl);
      const options = {
        executionProviders: [webgpu ? 'webgpu' : 'wasm'], graphOptimizationLevel: 'all',
        // Weights kept in files beside the model ({path, data: url}).
        externalData: cfg.externalData || [],
      };
      let placement = null;
      let placementMs = 0;
      if (webgpu) {
        // Which nodes the WebGPU EP took and which fell back to the CPU (wasm) EP: ORT says so only in its
        // verbose session log ("Node placements"), which then also logs every kernel of every run. So one
        // session is made with that log to read the placement, and the timed session without it.
        const tp = now();
        ortLog.on = true;
        ortLog.lines = [];
        try {
          const probe = await ort.InferenceSession.create(bytes, {...options, logSeverityLevel: 0, logVerbosityLevel: 0});
          await probe.release();
        } finally {
          ortLog.on = false;
        }
        placement = ortLog.lines.filter((l) => /VerifyEachNodeIsAssignedToAnEp|GetCapability|fallback/.test(l));
        ortLog.lines = [];
        placementMs = now() - tp;
      }
      const t3 = now();
      const session = await ort.InferenceSession.create(bytes, options);
      const modelLoadMs = now() - t3;
      const meta = (session.inputMetadata || [])[0];
      const dim0 = meta && meta.shape ? meta.shape[0] : undefined;
      return {
        facts: {
          library: 'onnxruntime-web', library_version: ort.env.versions ? ort.env.versions.web : '',
          backend: webgpu ? 'webgpu' : 'wasm', threads: ort.env.wasm.numThreads,
          batch_dynamic: !(typeof dim0 === 'number' && dim0 > 0),
          library_load_ms: libraryMs, backend_init_ms: placementMs, model_load_ms: modelLoadMs,
          ...(webgpu ? {webgpu_adapter: adapter, ort_placement_log: placement, ort_bundle: LIB.ortWebgpu} : {}),
        },
        sync: false, usesTfjs: false,
        wasmMemoryBytes: () => null,  // onnxruntime-web does not expose its wasm instance
        inputNames: session.inputNames,
        outputNames: session.outputNames,
        async infer(views, batch, inputs, outputs) {
          // int64 ids and masks travel as BigInt64Array, as onnxruntime-web takes them
          const feed = {};
          inputs.forEach((inp, k) => {
            feed[inp.model] = new ort.Tensor(ORT_DTYPE[inp.dtype] || 'float32', views[k], [batch, ...inp.shape]);
          });
          const r = await session.run(feed, outputs);
          return outputs.map((name) => asFloat32(r[name].data));
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
      const inType = ins[0].dataType;
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
        inputNames: ins.map((i) => i.name),
        outputNames: outs.map((o) => o.name),
        infer(views, batch, inputs, outputs) {
          if (batch !== 1) throw new Error('TFLite models run at batch 1 here');
          // getInputs()/getOutputs() each time: the tensor infos they return
          // are only valid until the next call (their C++ vector is freed).
          const live = mr.getInputs();
          inputs.forEach((inp, k) => {
            const tensor = live.find((i) => i.name === inp.model);
            if (!tensor) throw new Error(`the TFLite model has no input ${inp.model}`);
            const dst = tensor.data();  // the model's own type: ids may be int32 or int64 in the file
            const src = views[k];
            if (!dst || typeof dst.set !== 'function') {
              throw new Error(`tfjs-tflite gives no buffer for input ${inp.model} of type ${tensor.dataType}`);
            }
            if (dst instanceof BigInt64Array) {
              dst.set(src instanceof BigInt64Array ? src : BigInt64Array.from(src, (v) => BigInt(v)));
            } else {
              dst.set(src instanceof BigInt64Array ? Array.from(src, Number) : src);
            }
          });
          if (!mr.infer()) throw new Error('TFLite inference failed');
          const got = mr.getOutputs();
          return outputs.map((name) => {
            const o = got.find((x) => x.name === name);
            if (!o) throw new Error(`the TFLite model has no output ${name}`);
            const d = o.data();  // a view of the interpreter's memory: copied before the next inference
            return d instanceof Float32Array ? d.slice() : Float32Array.from(d, Number);
          });
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
    sampleMemory();
    status('loaded');
    return Object.assign({load_ms: now() - t0, input_names: runner.inputNames || [],
                          output_names: runner.outputNames || []}, runner.facts);
  }

  async function run(cfg) {
    if (!runner) throw new Error('no model is loaded');
    status('running');
    const n = cfg.n;
    const t0 = now();
    // What is left of the row's time limit (cfg.deadlineMs): a run that cannot finish by then stops as soon as its
    // pace shows it (after a second of inference), not at the limit. A real-size model in a slow runtime had run
    // on to it: ConvNeXt-Tiny's int8 TFLite in tfjs-tflite took its whole 900 s and measured nothing.
    const deadlineAt = cfg.deadlineMs ? t0 + cfg.deadlineMs : Infinity;
    const pace = (startedAt, done, left) => {
      const spentMs = now() - startedAt;
      if (deadlineAt === Infinity || done < 1 || left < 1 || spentMs < 1000) return;
      const per = spentMs / done;
      if (now() + per * left > deadlineAt) {
        throw new Error(`${OVER_TIME} at ${per.toFixed(1)} ms a sample, the ${left} inferences left need about ` +
                        `${Math.round(per * left / 1000)} s and ${Math.round((deadlineAt - now()) / 1000)} s are left`);
      }
    };
    // The model's named inputs (cfg.inputs; a single-array model's one), each its own typed array
    const arrays = [];
    for (const s of cfg.inputs) {
      const buf = await fetchBytes(s.url);
      const X = new (ARRAY[s.dtype] || Float32Array)(buf);
      const per = s.shape.reduce((a, b) => a * b, 1);
      if (X.length !== n * per) throw new Error(`inputs hold ${X.length} values, expected ${n} x ${per}`);
      arrays.push({X, per});
    }
    const fetchMs = now() - t0;
    const sample = (i, b) => arrays.map(({X, per}) => X.subarray(i * per, (i + b) * per));
    const infer = (v, b) => runner.infer(v, b, cfg.inputs, cfg.outputs);
    const inferStart = now();

    // First inference apart: it pays lazy initialisation (kernel compile,
    // shader build, memory planning) that steady state does not.
    let t = now();
    let first;
    try {
      first = runner.sync ? infer(sample(0, 1), 1) : await infer(sample(0, 1), 1);
    } catch (e) {
      // TF.js refuses a model with control flow synchronously ("use executeAsync", or for a while loop over
      // TensorLists "Cannot compute the outputs ... from the provided inputs"): it runs with executeAsync, the
      // documented way, and the row says what execute() said
      const said = String((e && e.message) || e);
      if (!(runner.sync && runner.goAsync && /executeAsync|Cannot compute the outputs/.test(said))) throw e;
      runner.goAsync();
      runner.facts.execute_refused = said.slice(0, 300);
      t = now();
      first = await infer(sample(0, 1), 1);
    }
    const firstMs = now() - t;
    const sizes = first.map((o) => o.length);  // values per sample of each output

    const tw = now();
    for (let i = 0; i < cfg.warmupRuns; i++) {
      const j = i % n;
      if (runner.sync) infer(sample(j, 1), 1); else await infer(sample(j, 1), 1);
      // the warm-ups left, the samples to time and, at batch 1, the rest of the set (a batched pass is quicker)
      pace(tw, i + 1, cfg.warmupRuns - i - 1 + (runner.facts.batch_dynamic && cfg.batchSize > 1
                                                 ? Math.min(cfg.latencySamples == null ? n : cfg.latencySamples, n) : n));
    }

    let m = Math.min(cfg.latencySamples == null ? n : cfg.latencySamples, n);
    // with no count asked, the batch-1 timing stops once it has taken the budget and has its minimum of readings
    // (a real-size model: ViT-B/16 takes seconds an inference in wasm); a count asked for is timed whole
    const budgetMs = cfg.latencySamples == null && cfg.latencyBudgetMs ? cfg.latencyBudgetMs : Infinity;
    const minReadings = cfg.minReadings || 1;
    const lat = new Float64Array(m);
    const bs = runner.facts.batch_dynamic ? Math.max(1, cfg.batchSize) : 1;
    const outputs = sizes.map((k) => new Float32Array(n * k));
    // A model that runs at batch 1 only: the timed batch-1 pass gives those samples' outputs too (kept
    // after each timer reading), and the whole-set pass runs only the samples it did not time.
    const keep = bs === 1;
    const put = (os, i, b) => {
      os.forEach((o, k) => {
        if (o.length !== b * sizes[k]) {
          throw new Error(`batch of ${b} gave ${o.length} outputs, expected ${b * sizes[k]}`);
        }
        outputs[k].set(o, i * sizes[k]);  // int8 outputs become their float values here
      });
    };
    t = now();
    const spent = (i) => i + 1 >= minReadings && now() - t > budgetMs;
    // the timed samples left, and at batch 1 the whole-set pass's (a batched pass's pace is its own, checked there)
    const timedLeft = (i) => m - i - 1 + (keep ? n - m : 0);
    if (runner.sync) {
      for (let i = 0; i < m; i++) {
        const v = sample(i, 1);
        const s = now();
        const o = infer(v, 1);
        lat[i] = now() - s;
        if (keep) put(o, i, 1);
        if (spent(i)) { m = i + 1; break; }
        pace(t, i + 1, timedLeft(i));
      }
    } else {
      for (let i = 0; i < m; i++) {
        const v = sample(i, 1);
        const s = now();
        const o = await infer(v, 1);
        lat[i] = now() - s;
        if (keep) put(o, i, 1);
        if (spent(i)) { m = i + 1; break; }
        pace(t, i + 1, timedLeft(i));
      }
    }
    const timedPassMs = now() - t;
    sampleMemory();

    const from = keep ? m : 0;
    t = now();
    for (let i = from; i < n; i += bs) {
      const b = Math.min(bs, n - i);
      put(runner.sync ? infer(sample(i, b), b) : await infer(sample(i, b), b), i, b);
      pace(t, i + b - from, n - i - b);
    }
    // the whole set's time: at batch 1 the timed pass is part of it
    const wholeSetMs = now() - t + (keep ? timedPassMs : 0);
    const inferenceMs = now() - inferStart;
    sampleMemory();

    status('posting');
    t = now();
    for (let k = 0; k < outputs.length; k++) await postBytes(`/results/output_${k}`, outputs[k]);
    await postBytes('/results/latency', lat.subarray(0, m));
    const postMs = now() - t;
    status('done');
    return {
      n, output_sizes: sizes, execution: runner.facts.execution || 'sync', latency_samples: m, batch_size: bs,
      execute_refused: runner.facts.execute_refused || null,
      outputs_from_timed_pass: keep ? m : 0,
      first_inference_ms: firstMs, whole_set_ms: wholeSetMs, inference_ms: inferenceMs,
      inputs_fetch_ms: fetchMs, results_post_ms: postMs, page_run_ms: now() - t0,
      js_heap_used_bytes: memory.jsHeapUsedPeak || null,
      tfjs_tensor_bytes: runner.usesTfjs ? memory.tensorBytesPeak : null,
      wasm_memory_bytes: memory.wasmBytes,
    };
  }

  const harness = {
    job: null,
    // {available: true, vendor, architecture, ...} or {available: false, reason}: what WebGPU rows would get
    async adapter() {
      try {
        return Object.assign({available: true}, await webgpuAdapter());
      } catch (e) {
        return {available: false, reason: String((e && e.message) || e).replace(NO_ADAPTER, '')};
      }
    },
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
