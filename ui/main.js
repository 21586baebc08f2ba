// main.js - sign-in and the views (hash routes: #/sandboxes, #/sandbox/ID, #/money,
// #/projects, #/host).  The page itself holds no data: without a key it shows the sign-in.
import { session, whoami } from "./api.js";
import { fill, errorText } from "./dom.js";
import { renderSandboxes } from "./sandboxes.js";
import { renderSandbox } from "./sandbox.js";
import { renderMoney } from "./money.js";
import { renderProjects } from "./projects.js";
import { renderHost } from "./host.js";

const $ = (id) => document.getElementById(id);
const ctx = { who: null };
let cleanup = () => {};

function signedOut(message = "") {
  cleanup();
  cleanup = () => {};
  session.clear();
  ctx.who = null;
  $("nav").hidden = true;
  $("signout").hidden = true;
  $("who").textContent = "";
  fill($("view"));
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  $("key").value = "";
  $("key").focus();
}

function route() {
  if (!ctx.who) return;
  cleanup();
  const [, what = "", id = ""] = location.hash.split("/").map(decodeURIComponent);
  const view = $("view");
  const operator = ctx.who.scope === "operator";
  const views = {
    sandboxes: () => renderSandboxes(view, ctx),
    sandbox: () => renderSandbox(view, ctx, id),
    money: () => renderMoney(view, ctx),
    projects: () => renderProjects(view, ctx),
    host: () => renderHost(view, ctx),
  };
  let name = views[what] && !(operator && what !== "host") ? what : operator ? "host" : "sandboxes";
  if (name !== what) {
    history.replaceState(null, "", "#/" + name);
  }
  for (const a of $("nav").querySelectorAll("a"))
    a.toggleAttribute("aria-current", a.getAttribute("href") === "#/" + (name === "sandbox" ? "sandboxes" : name));
  cleanup = views[name]() || (() => {});
  view.querySelector("h1")?.focus();
}

async function signIn() {
  try {
    ctx.who = await whoami();
  } catch (e) {
    signedOut(e.status === 401 ? "That key was refused (401): check it and try again." : errorText(e));
    return;
  }
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("signout").hidden = false;
  for (const a of $("nav").querySelectorAll("[data-for=account]")) a.hidden = ctx.who.scope === "operator";
  const acct = ctx.who.account ? ` · ${ctx.who.account.id}` : "";
  $("who").textContent = `${ctx.who.scope} key${acct}`;
  route();
}

session.onUnauthorized = () => signedOut("The key stopped working (401): sign in again.");
$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const k = $("key").value.trim();
  if (!k) return;
  session.set(k);
  $("key").value = "";
  signIn();
});
$("signout").addEventListener("click", () => signedOut());
window.addEventListener("hashchange", route);
if (session.key()) signIn();
else signedOut();
