// job.js: three steps of four forward passes and a timer, the job behind node_trace.1.log here,
// recorded with Node.js 20.20 by
//   node --trace-events-enabled \
//     --trace-event-categories v8,node,node.async_hooks,node.perf,node.perf.usertiming,node.fs.sync job.js
// (complete, begin/end and async events; the promises' async begins never ended).
const { performance } = require('perf_hooks');
const fs = require('fs');
function fwd(n){let s=0;for(let i=0;i<n;i++)s+=Math.sqrt(i);return s;}
async function step(k){
  performance.mark('step-start');
  for (let m=0;m<4;m++){ performance.mark('f'); fwd(200000); performance.measure('fwd '+m,'f'); }
  await new Promise(r=>setTimeout(r,5));
  fs.readFileSync(__filename);
  performance.measure('step '+k,'step-start');
}
(async()=>{for(let k=0;k<3;k++) await step(k);})();
