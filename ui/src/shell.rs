//! The thin shell: a winit window drawn with softbuffer, its events
//! translated for the input layer, and the link's change subscription
//! waking the event loop. Everything it shows comes from the replica
//! through the screen model and the renderer; everything the user does
//! goes through the input layer, and B2/B3 through core's built-ins with
//! this UI as the host.

use crate::font::Fonts;
use crate::geom::{Metrics, Screen};
use crate::host::UiHost;
use crate::input::{Ctx, Effect, Event, Input, Key};
use crate::render::{draw, Canvas};
use apex_core::exec;
use std::num::NonZeroU32;
use std::rc::Rc;
use std::time::Instant;
use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, EventLoop, EventLoopProxy};
use winit::keyboard::{Key as WKey, ModifiersState, NamedKey};
use winit::window::{Window, WindowId};

/// Sent to the event loop when the link has news.
#[derive(Debug, Clone, Copy)]
pub struct Wake;

struct Surface {
    window: Rc<Window>,
    surface: softbuffer::Surface<Rc<Window>, Rc<Window>>,
}

/// The application: the window, the model and the input state.
pub struct App {
    host: UiHost,
    title: String,
    surface: Option<Surface>,
    fonts: Fonts,
    input: Input,
    mods: ModifiersState,
    cursor: (i32, i32),
    started: Instant,
    /// Something to flush to the daemon since the last frame.
    dirty: bool,
    /// The connection's end was reported.
    lost: bool,
    pub error: Option<String>,
}

impl App {
    pub fn new(host: UiHost, title: String) -> App {
        App {
            host,
            title,
            surface: None,
            fonts: Fonts::new(1.0),
            input: Input::default(),
            mods: ModifiersState::empty(),
            cursor: (0, 0),
            started: Instant::now(),
            dirty: false,
            lost: false,
            error: None,
        }
    }

    fn metrics(&self) -> Metrics {
        Metrics::new(self.fonts.line_height(), self.fonts.scale)
    }

    fn size(&self) -> (i32, i32) {
        self.surface.as_ref().map_or((0, 0), |s| {
            let sz = s.window.inner_size();
            (sz.width as i32, sz.height as i32)
        })
    }

    /// Hands one event to the input layer and carries out its effects.
    fn input(&mut self, ev: Event) {
        let (w, h) = self.size();
        let m = self.metrics();
        let now = self.started.elapsed().as_millis() as u64;
        let effects = {
            let mut link = self.host.att.lock();
            let Some(node) = link.node_mut() else { return };
            let screen = Screen::new(&node.state, w, h, &m);
            let mut cx = Ctx { node, screen: &screen, fonts: &mut self.fonts, metrics: m };
            self.input.handle(ev, now, &mut cx)
        };
        self.dirty = true;
        for e in effects {
            let result = match e {
                Effect::Execute { window, column, text } => {
                    let (word, arg) = apex_core::look::split_command(&text);
                    match exec::lookup(word) {
                        Some(b) => {
                            let call = exec::Call { window, column, arg: arg.to_string() };
                            exec::run(&mut self.host, b, &call)
                        }
                        None => exec::execute(&mut self.host, window, &text),
                    }
                }
                Effect::Look { window, text } => exec::look(&mut self.host, window, &text),
                Effect::Refused(why) => Err(exec::ExecError::Host(why)),
            };
            if let Err(e) = result {
                // acme shows a refusal in +Errors.
                let _ = exec::warn(&mut self.host, None, &format!("{e}\n"));
            }
        }
        if let Some(s) = &self.surface {
            s.window.request_redraw();
        }
    }

    fn redraw(&mut self) {
        let (w, h) = self.size();
        let m = self.metrics();
        let Some(s) = self.surface.as_mut() else { return };
        let (Some(nw), Some(nh)) = (NonZeroU32::new(w as u32), NonZeroU32::new(h as u32)) else { return };
        if s.surface.resize(nw, nh).is_err() {
            return;
        }
        let mut canvas = Canvas::new(w, h);
        {
            let link = self.host.att.lock();
            let Some(node) = link.node() else { return };
            let screen = Screen::new(&node.state, w, h, &m);
            draw(&mut canvas, &node.state, &screen, &mut self.fonts, &m);
        }
        let Ok(mut buffer) = s.surface.buffer_mut() else { return };
        let n = buffer.len().min(canvas.pixels.len());
        buffer[..n].copy_from_slice(&canvas.pixels[..n]);
        let _ = buffer.present();
        // One flush a frame: whatever was typed since goes out together.
        if std::mem::take(&mut self.dirty) {
            let att = self.host.att.clone();
            self.host.rt.spawn(async move {
                let _ = att.flush().await;
            });
        }
    }

    fn key(&mut self, key: &WKey, text: Option<&str>) {
        let ctrl = self.mods.control_key();
        let k = match key {
            WKey::Named(NamedKey::Backspace) => Some(Key::Backspace),
            WKey::Named(NamedKey::Delete) => Some(Key::Delete),
            WKey::Named(NamedKey::ArrowLeft) => Some(Key::Left),
            WKey::Named(NamedKey::ArrowRight) => Some(Key::Right),
            WKey::Named(NamedKey::ArrowUp) => Some(Key::Up),
            WKey::Named(NamedKey::ArrowDown) => Some(Key::Down),
            WKey::Named(NamedKey::Home) => Some(Key::Home),
            WKey::Named(NamedKey::End) => Some(Key::End),
            WKey::Named(NamedKey::PageUp) => Some(Key::PageUp),
            WKey::Named(NamedKey::PageDown) => Some(Key::PageDown),
            WKey::Named(NamedKey::Escape) => Some(Key::Escape),
            WKey::Character(c) if ctrl => c.chars().next().map(|c| Key::Ctrl(c.to_ascii_lowercase())),
            _ => None,
        };
        match (k, key) {
            (Some(k), _) => self.input(Event::Key(k)),
            (None, WKey::Named(NamedKey::Enter)) => self.input(Event::Text("\n".into())),
            (None, WKey::Named(NamedKey::Tab)) => self.input(Event::Text("\t".into())),
            (None, WKey::Named(NamedKey::Space)) => self.input(Event::Text(" ".into())),
            (None, _) => {
                if let Some(t) = text.filter(|t| !t.chars().any(char::is_control)) {
                    self.input(Event::Text(t.to_string()));
                }
            }
        }
    }
}

impl ApplicationHandler<Wake> for App {
    fn resumed(&mut self, el: &ActiveEventLoop) {
        if self.surface.is_some() {
            return;
        }
        let attrs = Window::default_attributes()
            .with_title(self.title.clone())
            .with_inner_size(winit::dpi::LogicalSize::new(1024.0, 768.0));
        let made = el.create_window(attrs).map_err(|e| e.to_string()).and_then(|w| {
            let window = Rc::new(w);
            let context = softbuffer::Context::new(window.clone()).map_err(|e| e.to_string())?;
            let surface = softbuffer::Surface::new(&context, window.clone()).map_err(|e| e.to_string())?;
            Ok(Surface { window, surface })
        });
        match made {
            Ok(s) => {
                self.fonts = Fonts::new(s.window.scale_factor());
                s.window.request_redraw();
                self.surface = Some(s);
            }
            Err(e) => {
                self.error = Some(format!("cannot open a window: {e}"));
                el.exit();
            }
        }
    }

    fn user_event(&mut self, _el: &ActiveEventLoop, _wake: Wake) {
        if self.host.att.is_closed() && !self.lost {
            // Say so where acme says things; the replica stays readable.
            self.lost = true;
            let _ = exec::warn(
                &mut self.host,
                None,
                "apex-ui: the connection to apexd is gone; nothing typed now is saved\n",
            );
        }
        if let Some(s) = &self.surface {
            s.window.request_redraw();
        }
    }

    fn window_event(&mut self, el: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        match event {
            WindowEvent::CloseRequested => el.exit(),
            WindowEvent::RedrawRequested => self.redraw(),
            WindowEvent::Resized(_) => {
                if let Some(s) = &self.surface {
                    s.window.request_redraw();
                }
            }
            WindowEvent::ScaleFactorChanged { scale_factor, .. } => {
                self.fonts = Fonts::new(scale_factor);
            }
            WindowEvent::ModifiersChanged(m) => self.mods = m.state(),
            WindowEvent::CursorMoved { position, .. } => {
                self.cursor = (position.x as i32, position.y as i32);
                let (x, y) = self.cursor;
                self.input(Event::Motion { x, y });
            }
            WindowEvent::MouseInput { state, button, .. } => {
                let button = match button {
                    MouseButton::Left => 1,
                    MouseButton::Middle => 2,
                    MouseButton::Right => 3,
                    _ => return,
                };
                let (x, y) = self.cursor;
                self.input(match state {
                    ElementState::Pressed => Event::Press { button, x, y },
                    ElementState::Released => Event::Release { button, x, y },
                });
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => -(y.round() as i32) * 3,
                    MouseScrollDelta::PixelDelta(p) => -(p.y / f64::from(self.fonts.line_height())) as i32,
                };
                let (x, y) = self.cursor;
                if lines != 0 {
                    self.input(Event::Wheel { lines, x, y });
                }
            }
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                self.key(&event.logical_key, event.text.as_deref());
            }
            _ => {}
        }
        if self.host.exit {
            el.exit();
        }
    }
}

/// Runs the window until it is closed (or Exit is executed).
pub fn run(host: UiHost, title: String) -> Result<(), String> {
    let event_loop = EventLoop::<Wake>::with_user_event().build().map_err(|e| format!("no display: {e}"))?;
    let proxy: EventLoopProxy<Wake> = event_loop.create_proxy();
    // The link's news wakes the loop; no polling.
    let mut changes = host.att.changes();
    host.rt.spawn(async move {
        while changes.changed().await.is_ok() {
            if proxy.send_event(Wake).is_err() {
                break;
            }
        }
    });
    let mut app = App::new(host, title);
    event_loop.run_app(&mut app).map_err(|e| e.to_string())?;
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
