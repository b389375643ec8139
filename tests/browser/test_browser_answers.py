"""Issue 29, items 3-6, in headless Chromium at a laptop's and a phone's width against a real `grpo-studio serve`:
every validation problem marks its field and the list shows where Validate was pressed; a reward name that doesn't
exist is kept and reported, with the custom form offered only where allowed; Resume right after Stop is queued rather
than refused; the Runs page answers next to the control pressed, and the delete confirmation names the run.
Screenshots go to screenshots/ (git-ignored)."""

from __future__ import annotations

import pytest

from tests.browser.harness import CHROMIUM, FLAGS, NO_CHROMIUM, SCREENSHOTS, field_box, set_field, start_server
from tests.helpers import BROWSER_TIMEOUT_MS, PAGE_WAIT_S, run_row, wait_for

WIDTHS = {"laptop": (1440, 900), "phone": (390, 844)}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]


@pytest.fixture(scope="module")
def server(tiny_model_path, module_database):
    yield from start_server("serve-answers.log")


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(params=list(WIDTHS))
def page(request, browser, server):
    width, height = WIDTHS[request.param]
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    page.goto(server[0])
    page.wait_for_selector("#launch", state="attached")
    page.width_name = request.param
    yield page
    page.close()


def _in_view(page, selector: str) -> bool:
    """Whether the element's top edge is inside the viewport (where the user's eyes are after pressing)."""
    box = page.locator(selector).bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"]


def _invalid(page, field: str) -> bool:
    return "field-invalid" in (page.locator(f"#field-{field}").get_attribute("class") or "")


def test_every_problem_marks_its_field_and_the_list_is_where_validate_was_pressed(page):
    set_field(page, "num_generations", 1)
    set_field(page, "beta", -0.5)
    set_field(page, "learning_rate", -1)
    set_field(page, "reward_weights", "1, 2, 3")  # five rewards by default
    page.locator("#validate").scroll_into_view_if_needed()
    page.click("#validate")
    status = page.locator("#new-run-status")
    status.filter(has_text="4 problems").wait_for()
    for field in ("num_generations", "beta", "learning_rate", "reward_weights"):
        wait_for(lambda f=field: _invalid(page, f), PAGE_WAIT_S, f"{field} to be marked")
    assert "3 reward weights for 5 reward functions" in page.locator("#field-reward_weights").inner_text()
    wait_for(lambda: _in_view(page, "#new-run-status"), PAGE_WAIT_S, "the problem list to be in view")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"validate-{page.width_name}.png"))


def test_an_unknown_reward_name_is_kept_and_reported_and_no_custom_form_is_offered(page):
    field = page.locator("#field-reward_funcs")
    assert "file.py" not in field.inner_text()  # this dashboard was started without --allow-custom-rewards
    box = page.locator("#field-reward_funcs input")
    box.click()
    box.fill("no_such_reward")
    box.press("Enter")
    page.keyboard.press("Escape")
    wait_for(lambda: "no_such_reward" in field.inner_text(), PAGE_WAIT_S, "the typed name to stay in the field")
    page.locator("#validate").scroll_into_view_if_needed()
    page.click("#validate")
    page.locator("#new-run-status").filter(has_text="no_such_reward").wait_for()
    wait_for(lambda: _invalid(page, "reward_funcs"), PAGE_WAIT_S, "the rewards field to be marked")
    assert "unknown reward function 'no_such_reward'" in field.inner_text()
    assert "file.py" not in page.locator("#new-run-status").inner_text()


def test_resume_right_after_stop_is_queued_and_answers_sit_next_to_their_controls(page):
    if page.width_name != "laptop":
        pytest.skip("the run's life is tested once; the phone width checks the answers' places below")
    set_field(page, "name", "stop-then-resume")
    set_field(page, "max_steps", 300)
    page.locator("#launch").scroll_into_view_if_needed()
    page.click("#launch")
    status = page.locator("#new-run-status").filter(has_text="(stop-then-resume)")
    # attached, not visible: the launch opens the Monitor, and the answer may land on the New run tab behind it
    status.wait_for(state="attached")
    run_id = int(status.inner_text().split("Run ")[1].split()[0])
    wait_for(lambda: run_row(run_id).current_step >= 3, 300, "three steps")

    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-run-id input").fill(str(run_id))
    page.locator("#runs-run-id input").press("Tab")
    confirm = page.locator("#runs-confirm")
    wait_for(lambda: f"delete run {run_id} (stop-then-resume)" in confirm.inner_text(), PAGE_WAIT_S, "the run named")
    message = page.locator("#runs-message")
    page.click("#runs-stop")
    message.filter(has_text="stop requested").wait_for()
    assert _in_view(page, "#runs-message")
    wait_for(lambda: run_row(run_id).status == "stopped", 180, "the run to read stopped")
    page.click("#runs-resume")  # at once: the worker may still be saving its adapter and exiting
    message.filter(has_text=f"Run {run_id} queued to resume").wait_for(timeout=150_000)
    assert "still shutting down" not in message.inner_text()
    wait_for(lambda: run_row(run_id).status == "running", 180, "the resumed run to train")
    page.click("#runs-stop")
    wait_for(lambda: run_row(run_id).status == "stopped", 180, "the run to stop again")

    page.click("#runs-delete")  # not confirmed: refused, next to the delete button
    delete_message = page.locator("#runs-delete-message")
    delete_message.filter(has_text=f"tick 'yes, delete run {run_id}'").wait_for()
    assert _in_view(page, "#runs-delete-message")
    confirm.locator("input").check()
    page.click("#runs-delete")
    delete_message.filter(has_text=f"Run {run_id} (stop-then-resume) deleted.").wait_for()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "runs-answers-laptop.png"))
    assert run_row(run_id) is None


def test_the_runs_answers_are_in_view_at_phone_width(page):
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-run-id input").fill("99999")
    page.locator("#runs-stop").scroll_into_view_if_needed()
    page.click("#runs-stop")
    page.locator("#runs-message").filter(has_text="no run with id 99999").wait_for()
    assert _in_view(page, "#runs-message")
    page.locator("#runs-fork").scroll_into_view_if_needed()
    page.click("#runs-fork")
    page.locator("#runs-fork-message").filter(has_text="pick a run and one of its saved checkpoints").wait_for()
    assert _in_view(page, "#runs-fork-message")
    page.screenshot(path=str(SCREENSHOTS.mkdir(exist_ok=True) or SCREENSHOTS / f"runs-{page.width_name}.png"))
    assert field_box(page, "name").count() == 1
