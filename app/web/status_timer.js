// The page's status trackers time a pending event by a requestAnimationFrame loop that schedules itself again while
// the event is pending (gradio 6.31, templates/frontend/assets/statustracker-*.js: `function ze(){me(()=>{...,W&&ze()})}`,
// `me` being window.requestAnimationFrame as the module found it). One such loop goes on after the page has loaded,
// with no event pending and no tracker left on the page (a Blocks of one button has it too), so an open dashboard
// drew 60 frames a second for as long as it stayed open: about 5 % of a core in Chromium with nothing on the page
// moving (bench/idle_page.py). Here, first in the page's head (put there by app/page_script.py, so before Gradio's
// modules take window.requestAnimationFrame), a frame asked for by a status tracker becomes a timer a tenth of a
// second away: the elapsed time a pending event shows (to a tenth of a second) still counts, and no frame is drawn
// for the timer itself. Every other caller gets its frames as before.
(() => {
  const frame = window.requestAnimationFrame.bind(window);
  window.requestAnimationFrame = (callback) => {
    if ((new Error().stack || "").includes("/statustracker-")) {
      return setTimeout(() => callback(performance.now()), 100);
    }
    return frame(callback);
  };
})();
