//! The thin shell: a winit window drawn with softbuffer, its events
//! translated for the input layer, and the link's change subscription
//! waking the event loop. Everything it shows comes from the replica
//! through the screen model and the renderer; everything the user does
//! goes through the input layer, and B2/B3 through core's built-ins with
//! this UI as the host.

use crate::app::Ui;
use crate::error::UiError;
use crate::focus::X11Focus;
use crate::host::UiHost;
use crate::input::{Event, Key};
use crate::rect::Rect;
use std::num::NonZeroU32;
use std::rc::Rc;
use winit::application::ApplicationHandler;
use winit::event::{ElementState, Ime, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, EventLoop, EventLoopProxy};
use winit::keyboard::{Key as WKey, ModifiersState, NamedKey};
use winit::window::{CustomCursor, Window, WindowId};

/// Sent to the event loop when the link has news.
#[derive(Debug, Clone, Copy)]
pub struct Wake;

struct Surface {
    window: Rc<Window>,
    surface: softbuffer::Surface<Rc<Window>, Rc<Window>>,
}

/// The application in its window.
pub struct App {
    ui: Ui,
    title: String,
    surface: Option<Surface>,
    mods: ModifiersState,
    cursor: (i32, i32),
    pub error: Option<UiError>,
    /// A redraw we asked for is pending (any other is an expose).
    requested: bool,
    /// The next frame is presented whole.
    whole: bool,
    /// Focus without a window manager, on X11.
    focus: Option<X11Focus>,
    /// acme's arrow and box pointers, once made.
    cursors: (Option<CustomCursor>, Option<CustomCursor>),
    /// The box pointer is shown.
    boxed: bool,
    /// When the program started, until the first frame is shown.
    timing: Option<std::time::Instant>,
}

impl App {
    pub fn new(host: UiHost, title: String, options: Options) -> App {
        let mut ui = Ui::new(host, 0, 0, 1.0);
        ui.input.click_to_type = options.click_to_type;
        ui.choose_fonts(options.fonts);
        App {
            ui,
            title,
            surface: None,
            mods: ModifiersState::empty(),
            cursor: (0, 0),
            error: None,
            requested: false,
            whole: true,
            focus: None,
            cursors: (None, None),
            boxed: false,
            timing: std::env::var_os("APEX_UI_TIMING").map(|_| options.started),
        }
    }

    fn request_redraw(&mut self) {
        if let Some(s) = &self.surface {
            self.requested = true;
            s.window.request_redraw();
        }
    }

    fn input(&mut self, ev: Event) {
        self.ui.handle(ev);
        self.pointer();
        self.request_redraw();
    }

    /// The pointer as the UI wants it: moved where acme moves it, and
    /// the box while a layout box is held.
    fn pointer(&mut self) {
        let Some(s) = &self.surface else { return };
        if let Some((x, y)) = self.ui.take_warp() {
            if s.window.set_cursor_position(winit::dpi::PhysicalPosition::new(x, y)).is_ok() {
                self.cursor = (x, y);
            }
        }
        let boxed = self.ui.input.holding_box();
        if boxed != self.boxed {
            self.boxed = boxed;
            let shape = if boxed { &self.cursors.1 } else { &self.cursors.0 };
            if let Some(c) = shape {
                s.window.set_cursor(c.clone());
            }
        }
    }

    /// Paints what changed and shows it: only the damaged rectangles are
    /// copied and presented, unless the surface's buffer is new.
    fn redraw(&mut self) {
        let Some(s) = self.surface.as_mut() else { return };
        let size = s.window.inner_size();
        let (Some(nw), Some(nh)) = (NonZeroU32::new(size.width), NonZeroU32::new(size.height)) else { return };
        if s.surface.resize(nw, nh).is_err() {
            return;
        }
        self.ui.resize(size.width as i32, size.height as i32);
        let damage = self.ui.paint();
        let Ok(mut buffer) = s.surface.buffer_mut() else { return };
        let canvas = &self.ui.canvas;
        if buffer.len() != canvas.pixels.len() {
            return;
        }
        // Only a buffer that holds the last frame (age 1) can take just
        // the damage; a new one, or one from frames ago, gets it all.
        let whole = [canvas.bounds()];
        let all = std::mem::take(&mut self.whole) || buffer.age() != 1;
        let rects: &[Rect] = if all { &whole } else { &damage };
        for r in rects {
            for y in r.y0..r.y1 {
                let row = (y * canvas.width) as usize;
                let span = row + r.x0 as usize..row + r.x1 as usize;
                buffer[span.clone()].copy_from_slice(&canvas.pixels[span]);
            }
        }
        let shown: Vec<softbuffer::Rect> = rects
            .iter()
            .filter_map(|r| {
                Some(softbuffer::Rect {
                    x: r.x0 as u32,
                    y: r.y0 as u32,
                    width: NonZeroU32::new(r.width() as u32)?,
                    height: NonZeroU32::new(r.height() as u32)?,
                })
            })
            .collect();
        let presented = match shown.is_empty() {
            true => Ok(()),
            false => buffer.present_with_damage(&shown),
        };
        if let (Some(started), Ok(())) = (self.timing, presented) {
            self.timing = None;
            eprintln!("apex-ui: first frame shown {:.1} ms after start", started.elapsed().as_secs_f64() * 1e3);
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
            WKey::Named(NamedKey::Insert) => Some(Key::Insert),
            WKey::Named(f) => function_key(f).map(Key::F),
            WKey::Character(c) if ctrl => c.chars().next().map(|c| Key::Ctrl(c.to_ascii_lowercase())),
            WKey::Character(c) if self.mods.alt_key() => c.chars().next().map(Key::Alt),
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

/// F1 to F12's number.
fn function_key(k: &NamedKey) -> Option<u8> {
    const KEYS: [NamedKey; 12] = [
        NamedKey::F1,
        NamedKey::F2,
        NamedKey::F3,
        NamedKey::F4,
        NamedKey::F5,
        NamedKey::F6,
        NamedKey::F7,
        NamedKey::F8,
        NamedKey::F9,
        NamedKey::F10,
        NamedKey::F11,
        NamedKey::F12,
    ];
    KEYS.iter().position(|f| f == k).map(|i| i as u8 + 1)
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
                // Text composed by an input method arrives as Ime::Commit.
                s.window.set_ime_allowed(true);
                let make = |shape: &crate::cursor::Shape| {
                    let (w, h) = (shape.width(), shape.height());
                    let source = CustomCursor::from_rgba(shape.rgba(), w, h, shape.hot.0, shape.hot.1).ok()?;
                    Some(el.create_custom_cursor(source))
                };
                self.cursors = (make(&crate::cursor::ARROW), make(&crate::cursor::BOX));
                if let Some(arrow) = &self.cursors.0 {
                    s.window.set_cursor(arrow.clone());
                }
                self.focus = x11_window(&s.window).and_then(X11Focus::open);
                // The faces are made again only for another scale.
                if s.window.scale_factor() != self.ui.fonts.scale {
                    self.ui.set_scale(s.window.scale_factor());
                }
                self.ui.use_system_clipboard();
                s.window.request_redraw();
                self.surface = Some(s);
            }
            Err(e) => {
                self.error = Some(UiError::Window(e));
                el.exit();
            }
        }
    }

    fn user_event(&mut self, _el: &ActiveEventLoop, _wake: Wake) {
        self.ui.woke();
        self.pointer();
        self.request_redraw();
    }

    fn window_event(&mut self, el: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        match event {
            WindowEvent::CloseRequested => el.exit(),
            WindowEvent::RedrawRequested => {
                // Not asked for by us: the X server exposed the window (it
                // was uncovered or mapped again) and its pixels are gone.
                let exposed = !std::mem::take(&mut self.requested);
                if exposed {
                    self.whole = true;
                    // Mapped: no window manager gives it the keys.
                    if let Some(f) = &self.focus {
                        f.take();
                    }
                }
                self.redraw();
                // Painting may have moved what the pointer was over.
                self.pointer();
            }
            WindowEvent::Resized(_) => self.request_redraw(),
            // Mapped again, or part of it uncovered (X's VisibilityNotify):
            // what the server showed there is gone, so all of it is shown
            // again, whatever the expose that comes with it finds.
            WindowEvent::Occluded(false) => {
                self.whole = true;
                self.request_redraw();
            }
            WindowEvent::ScaleFactorChanged { scale_factor, .. } => {
                self.ui.set_scale(scale_factor);
                self.request_redraw();
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
                // A notch is X's button 4 or 5; a touchpad's pixels count
                // a notch a line.
                let notches = match delta {
                    MouseScrollDelta::LineDelta(_, y) => -(y.round() as i32),
                    MouseScrollDelta::PixelDelta(p) => -(p.y / f64::from(self.ui.fonts.line_height())) as i32,
                };
                let (x, y) = self.cursor;
                if notches != 0 {
                    self.input(Event::Wheel { notches, x, y });
                }
            }
            WindowEvent::CursorEntered { .. } => {
                if let Some(f) = &self.focus {
                    f.take();
                }
            }
            WindowEvent::Ime(Ime::Commit(text)) if !text.is_empty() => self.input(Event::Text(text)),
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                self.key(&event.logical_key, event.text.as_deref());
            }
            _ => {}
        }
        if self.ui.exiting() {
            el.exit();
        }
    }
}

/// The X11 id of a window, when it is on an X display.
fn x11_window(window: &Window) -> Option<u32> {
    use winit::raw_window_handle::{HasWindowHandle, RawWindowHandle};
    match window.window_handle().ok()?.as_raw() {
        RawWindowHandle::Xlib(h) => u32::try_from(h.window).ok(),
        RawWindowHandle::Xcb(h) => Some(h.window.get()),
        _ => None,
    }
}

/// How the user asked the window to behave.
pub struct Options {
    /// Typing goes to the text last clicked (acme's `-b`).
    pub click_to_type: bool,
    /// The faces (`-f`, `-F`).
    pub fonts: crate::font::Choice,
    /// When the program started: with `$APEX_UI_TIMING` set, the time to
    /// the first frame shown is said on standard error (the benchmark's
    /// start-to-first-frame).
    pub started: std::time::Instant,
}

impl Default for Options {
    fn default() -> Options {
        Options { click_to_type: false, fonts: Default::default(), started: std::time::Instant::now() }
    }
}

/// Runs the window until it is closed (or Exit is executed).
pub fn run(host: UiHost, title: String, options: Options) -> Result<(), UiError> {
    let event_loop = EventLoop::<Wake>::with_user_event().build().map_err(UiError::NoDisplay)?;
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
    // So does a message from the plumber.
    let (wake, proxy) = (host.wake.clone(), event_loop.create_proxy());
    host.rt.spawn(async move {
        loop {
            wake.notified().await;
            if proxy.send_event(Wake).is_err() {
                break;
            }
        }
    });
    let mut app = App::new(host, title, options);
    let ran = event_loop.run_app(&mut app).map_err(UiError::EventLoop);
    app.ui.leave();
    ran?;
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
